// Documents of one namespace: upload (drop or file input) with progress, follow ingestion, list, delete.

import { deleteJson, getJson, listAll, uploadDocument } from "./api.js";
import { el, humanBytes } from "./dom.js";

const ENDED = new Set(["completed", "failed", "cancelled"]);
const POLL_MS = 400;

/**
 * The documents card. `elements` are its parts, found by the page (main.js): `body` (hidden when the
 * bot hides its sources) and `hiddenNote` (shown instead), `uploads` and `list` (lists), `input` (a
 * file input), `dropZone` and `refresh` (a button). Nothing here looks up the page's ids, so two
 * cards can live on one page.
 */
export class Documents {
  constructor({ elements, namespace, onError }) {
    this.namespace = namespace; // () => the current namespace
    this.onError = onError;
    this.hidden = false;
    this.body = elements.body;
    this.hiddenNote = elements.hiddenNote;
    this.uploads = elements.uploads;
    this.list = elements.list;
    this.input = elements.input;
    this.dropZone = elements.dropZone;
    this.input.addEventListener("change", () => {
      const files = [...this.input.files];
      this.input.value = ""; // the native control would keep showing the last name
      this.uploadAll(files);
    });
    for (const type of ["dragenter", "dragover"]) {
      this.dropZone.addEventListener(type, (event) => {
        event.preventDefault();
        this.dropZone.classList.add("dragging");
      });
    }
    for (const type of ["dragleave", "drop"]) {
      this.dropZone.addEventListener(type, () => this.dropZone.classList.remove("dragging"));
    }
    this.dropZone.addEventListener("drop", (event) => {
      event.preventDefault();
      this.uploadAll([...event.dataTransfer.files]);
    });
    elements.refresh.addEventListener("click", () => this.refresh());
  }

  /** A bot whose sources are hidden shows no document names at all: nothing is rendered, not just hidden. */
  setHidden(hidden) {
    this.hidden = hidden;
    this.body.hidden = hidden;
    this.hiddenNote.hidden = !hidden;
    if (hidden) {
      this.uploads.replaceChildren();
      this.list.replaceChildren();
    } else {
      this.refresh();
    }
  }

  async uploadAll(files) {
    await Promise.all(files.map((file) => this.upload(file)));
    this.refresh();
  }

  async upload(file) {
    const bar = el("progress", { max: "1", value: "0", "aria-label": `Upload of ${file.name}` });
    const status = el("span", { class: "upload-status" }, "uploading 0%");
    const row = el("li", { class: "upload" },
      el("div", { class: "upload-name" }, el("span", { class: "filename" }, file.name), el("span", { class: "subtle" }, humanBytes(file.size))),
      bar, status);
    this.uploads.prepend(row);
    const show = (text, tone) => {
      status.textContent = text;
      row.dataset.state = tone || "";
    };
    try {
      let doc = await uploadDocument(file, this.namespace(), (fraction) => {
        bar.value = fraction;
        show(`uploading ${Math.round(fraction * 100)}%`);
      });
      bar.value = 1;
      while (!ENDED.has(doc.status)) {
        const p = doc.progress || {};
        show(`processing · ${p.pages_parsed || 0} pages, ${p.passages_written || 0} passages`, "working");
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        doc = await getJson(`documents/${encodeURIComponent(doc.id)}`);
      }
      if (doc.status === "completed") {
        const ready = `ready · ${doc.page_count} ${doc.page_count === 1 ? "page" : "pages"}, ${doc.chunk_count} passages`;
        // Keyword search works now; with an embedding model, vectors follow (hybrid search once they are in).
        while (doc.embeddings && doc.embeddings.status === "in_progress") {
          show(`${ready} · embedding ${doc.embeddings.passages_embedded}/${doc.embeddings.passages}`, "done");
          await new Promise((resolve) => setTimeout(resolve, POLL_MS));
          doc = await getJson(`documents/${encodeURIComponent(doc.id)}`);
        }
        show(ready, "done");
      } else {
        show(`${doc.status}: ${(doc.last_error && doc.last_error.message) || "no reason given"}`, "failed");
      }
    } catch (error) {
      show(`failed: ${error.message}`, "failed");
    }
  }

  async refresh() {
    if (this.hidden) return;
    const namespace = this.namespace();
    try {
      const docs = await listAll(`documents?namespace=${encodeURIComponent(namespace)}&order=desc`);
      if (this.hidden || namespace !== this.namespace()) return; // changed while loading
      this.list.replaceChildren(...docs.map((doc) => this.row(doc)));
      if (!docs.length) this.list.append(el("li", { class: "subtle small empty" }, `No documents in “${namespace}” yet.`));
    } catch (error) {
      this.onError(error);
    }
  }

  row(doc) {
    const remove = el("button", { type: "button", class: "link-button danger", "aria-label": `Delete ${doc.filename}` }, "Delete");
    remove.addEventListener("click", async () => {
      remove.disabled = true;
      try {
        await deleteJson(`documents/${encodeURIComponent(doc.id)}`);
        this.refresh();
      } catch (error) {
        remove.disabled = false;
        this.onError(error);
      }
    });
    const detail = doc.status === "completed"
      ? `${doc.page_count} ${doc.page_count === 1 ? "page" : "pages"} · ${humanBytes(doc.bytes)}`
      : doc.status;
    return el("li", { class: `document ${doc.status}` },
      el("div", { class: "document-main" },
        el("span", { class: "filename", title: doc.title || doc.filename }, doc.filename),
        el("span", { class: "subtle small" }, detail)),
      remove);
  }
}
