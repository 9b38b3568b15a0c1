// Documents of one namespace: upload (drop or file input) with progress, follow ingestion, list, delete.

import { deleteJson, getJson, listAll, uploadDocument } from "./api.js";
import { el, humanBytes } from "./dom.js";
import { acceptAttribute, isAccepted, unsupportedMessage } from "./formats.js";
import { UploadRow, describeDocument, plural, sizeOf } from "./uploads.js";

const ENDED = new Set(["completed", "failed", "cancelled"]);
const POLL_MS = 400;

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The documents card. `elements` are its parts, found by the page (main.js): `body` (hidden when the
 * bot hides its sources) and `hiddenNote` (shown instead), `uploads` and `list` (lists), `input` (a
 * file input), `dropZone` and `refresh` (a button). Nothing here looks up the page's ids, so two
 * cards can live on one page. `rowOptions` go to each UploadRow (how long finished rows stay).
 */
export class Documents {
  constructor({ elements, namespace, onError, rowOptions = {} }) {
    this.namespace = namespace; // () => the current namespace
    this.onError = onError;
    this.rowOptions = rowOptions;
    this.hidden = false;
    this.listed = 0; // the latest refresh asked; an older answer arriving late is dropped
    this.body = elements.body;
    this.hiddenNote = elements.hiddenNote;
    this.uploads = elements.uploads;
    this.list = elements.list;
    this.input = elements.input;
    this.dropZone = elements.dropZone;
    this.input.accept = acceptAttribute();
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
    const row = new UploadRow(this.uploads, file, {
      ...this.rowOptions,
      onGone: (_, hadFocus) => {
        if (hadFocus) this.input.focus(); // focus never falls to the top of the page
      },
    });
    if (!isAccepted(file.name)) {
      row.refused(unsupportedMessage(file.name)); // nothing is sent
      return;
    }
    try {
      let doc = await uploadDocument(file, this.namespace(), (fraction) => row.sending(fraction));
      while (!ENDED.has(doc.status)) {
        row.processing(describeDocument(doc));
        await pause(POLL_MS);
        doc = await getJson(`documents/${encodeURIComponent(doc.id)}`);
      }
      if (doc.status !== "completed") {
        row.failed((doc.last_error && doc.last_error.message) || "no reason given", doc.status);
        return;
      }
      while (doc.embeddings && doc.embeddings.status === "in_progress") {
        const { passages_embedded: embedded, passages } = doc.embeddings;
        row.embedding(describeDocument(doc), passages ? embedded / passages : 0);
        await pause(POLL_MS);
        doc = await getJson(`documents/${encodeURIComponent(doc.id)}`);
      }
      row.done(describeDocument(doc));
    } catch (error) {
      if (error.code === "unsupported_file_type") row.refused(unsupportedMessage(file.name));
      else row.failed(error.message);
    }
  }

  /** List the namespace again. Rows that did not change are kept as they are (focus, a pending delete),
   * so a refresh every few seconds does not flicker. ``quiet``: a background refresh reports no error. */
  async refresh({ quiet = false } = {}) {
    if (this.hidden) return;
    const namespace = this.namespace();
    const asked = ++this.listed;
    try {
      const docs = await listAll(`documents?namespace=${encodeURIComponent(namespace)}&order=desc`);
      if (this.hidden || namespace !== this.namespace() || asked !== this.listed) return; // changed while loading
      const rows = docs.map((doc) => this.keptRow(doc) || this.row(doc));
      if (!docs.length) rows.push(this.emptyRow(namespace));
      syncChildren(this.list, rows);
    } catch (error) {
      if (!quiet) this.onError(error);
    }
  }

  /** The row already shown for ``doc``, when nothing it shows has changed. */
  keptRow(doc) {
    const key = rowKey(doc);
    return [...this.list.children].find((row) => row.dataset.key === key) || null;
  }

  emptyRow(namespace) {
    const text = `No documents in “${namespace}” yet.`;
    const kept = [...this.list.children].find((row) => row.classList.contains("empty") && row.textContent === text);
    return kept || el("li", { class: "subtle small empty" }, text);
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
      ? `${sizeOf(doc).replace(/, $/, " · ")}${humanBytes(doc.bytes)}`
      : doc.status;
    return el("li", { class: `document ${doc.status}`, "data-key": rowKey(doc) },
      el("div", { class: "document-main" },
        el("span", { class: "filename", title: doc.title || doc.filename }, doc.filename),
        el("span", { class: "subtle small" }, detail)),
      remove);
  }
}

/** What a document row shows: when this changes, the row is drawn again. */
function rowKey(doc) {
  return JSON.stringify([doc.id, doc.status, doc.filename, doc.title, doc.page_count, doc.extent, doc.bytes]);
}

/** Make ``list``'s children exactly ``rows``, in order, moving as few nodes as possible: a kept node
 * is not taken out of the page, so it keeps its focus. */
function syncChildren(list, rows) {
  const wanted = new Set(rows);
  for (const child of [...list.children]) if (!wanted.has(child)) child.remove();
  let at = list.firstElementChild;
  for (const row of rows) {
    if (row === at) at = at.nextElementSibling;
    else list.insertBefore(row, at);
  }
}
