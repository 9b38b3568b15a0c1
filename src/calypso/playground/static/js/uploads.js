// One upload row: the file's name and size, a bar, a one-line status, a dismiss button. Finished rows
// clear themselves; the bar is full only on success and red on failure.

import { el, humanBytes } from "./dom.js";

const DONE_KEEP_MS = 8000; // a finished row stays this long, so "ready" can be read
const FAILED_KEEP_MS = 30000; // a failure stays longer: its reason matters more

export function plural(count, word) {
  return `${count} ${count === 1 ? word : `${word}s`}`;
}

/** A completed document's size in its own units and a separator ("12 slides, ", "4 sections, "), or "" when
 * it has none a reader could count: never "1 page" for a Markdown file. Older servers send no ``extent``. */
export function sizeOf(doc) {
  const extent = doc.extent === undefined ? plural(doc.page_count, "page") : doc.extent;
  return extent ? `${extent}, ` : "";
}

/** The status of a document that is being ingested or is ready, in one line. */
export function describeDocument(doc) {
  if (doc.status !== "completed") {
    const p = doc.progress || {};
    if (p.detail) return `waiting · ${p.detail}`; // nothing can take the job: say why, not "0 pages"
    if (p.state === "queued") return "queued · waiting for an ingestion worker";
    // While a scan is read by OCR, pages come in one by one before any passage is written.
    if (p.pages_parsed && !p.passages_written) return `processing · ${plural(p.pages_parsed, "page")} read`;
    return `processing · ${plural(p.pages_parsed || 0, "page")}, ${plural(p.passages_written || 0, "passage")}`;
  }
  const ready = `ready · ${sizeOf(doc)}${plural(doc.chunk_count, "passage")}`;
  const embeddings = doc.embeddings;
  if (!embeddings || embeddings.status !== "in_progress") return ready;
  // Keyword search works already; the vectors follow (hybrid search once they are in).
  if (!embeddings.passages_embedded) return `${ready} · embedding queued`;
  return `${ready} · embedding ${embeddings.passages_embedded}/${embeddings.passages}`;
}

/** An API error's message on one line: the first sentence when the server lists alternatives after it. */
export function oneLine(message) {
  const flat = String(message || "no reason given").replace(/\s+/g, " ").trim();
  const listed = flat.search(/ Supported (types|formats)?:/i);
  return listed > 0 ? flat.slice(0, listed) : flat;
}

export class UploadRow {
  /** A row for ``file``, put at the top of ``list``; ``onGone(row)`` is told when it leaves. */
  constructor(list, file, { doneKeepMs = DONE_KEEP_MS, failedKeepMs = FAILED_KEEP_MS, onGone = () => {} } = {}) {
    this.keep = { done: doneKeepMs, failed: failedKeepMs };
    this.onGone = onGone;
    this.timer = 0;
    this.bar = el("progress", { max: "1", value: "0", "aria-label": `Upload of ${file.name}` });
    this.status = el("span", { class: "upload-status" }, "uploading 0%");
    const dismiss = el("button", { type: "button", class: "dismiss", "aria-label": `Dismiss ${file.name}`, title: "Dismiss" }, "×");
    dismiss.addEventListener("click", () => this.remove());
    this.node = el("li", { class: "upload" },
      el("div", { class: "upload-name" },
        el("span", { class: "filename" }, file.name),
        el("span", { class: "upload-side" }, el("span", { class: "subtle" }, humanBytes(file.size)), dismiss)),
      this.bar, this.status);
    list.prepend(this.node);
  }

  sending(fraction) {
    this.bar.value = fraction;
    this.show(`uploading ${Math.round(fraction * 100)}%`, "");
  }

  /** The bytes are in; the server works for an unknown while: an indeterminate bar, not a full one. */
  processing(text) {
    this.bar.removeAttribute("value");
    this.show(text, "working");
  }

  /** Ready, with the vectors still coming: the bar shows how many are in. */
  embedding(text, fraction) {
    this.bar.value = fraction;
    this.show(text, "embedding");
  }

  done(text) {
    this.bar.value = 1;
    this.show(text, "done");
    this.clearLater(this.keep.done);
  }

  /** The API's reason, after the document's status ("failed: …", "cancelled: …"). */
  failed(reason, status = "failed") {
    this.bar.value = 1;
    this.show(`${status}: ${oneLine(reason)}`, "failed");
    this.clearLater(this.keep.failed);
  }

  /** Refused before sending (a type the server does not take): one line, the list of types is above. */
  refused(text) {
    this.bar.value = 1;
    this.show(text, "failed");
    this.node.classList.add("refused");
    this.clearLater(this.keep.failed);
  }

  show(text, state) {
    this.status.textContent = text;
    this.status.title = text; // the status is cut to one line; the whole of it on hover
    this.node.dataset.state = state;
  }

  clearLater(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.remove(), ms);
  }

  remove() {
    clearTimeout(this.timer);
    if (!this.node.isConnected) return;
    const hadFocus = this.node.contains(document.activeElement);
    this.node.remove();
    this.onGone(this, hadFocus);
  }
}
