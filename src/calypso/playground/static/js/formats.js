// The file types the server ingests, in one place: the picker's `accept`, the drop hint, and the
// one-line refusal of anything else. Keep it in step with calypso/ingest/formats.py (FORMATS);
// a new format is one more row here.

export const FORMATS = [
  { name: "PDF", extensions: [".pdf"] },
  { name: "images", extensions: [".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"] },
  { name: "DOCX", extensions: [".docx"] },
  { name: "PPTX", extensions: [".pptx"] },
  { name: "XLSX", extensions: [".xlsx"] },
  { name: "CSV/TSV", extensions: [".csv", ".tsv"] },
  { name: "EPUB", extensions: [".epub"] },
  { name: "EML/MSG", extensions: [".eml", ".msg"] },
  { name: "HTML", extensions: [".html", ".htm", ".xhtml"] },
  { name: "Markdown", extensions: [".md", ".markdown"] },
  { name: "text", extensions: [".txt", ".text", ".log", ".rst"] },
];

const EXTENSIONS = new Set(FORMATS.flatMap((format) => format.extensions));

/** The file input's `accept` attribute: every accepted extension. */
export function acceptAttribute() {
  return [...EXTENSIONS].join(",");
}

/** "PDF, DOCX, …, text": what the drop zone and the refusal name. */
export function formatNames() {
  return FORMATS.map((format) => format.name).join(", ");
}

/** ".exe" for "setup.EXE"; "" when the name has no extension. */
export function extensionOf(filename) {
  const dot = filename.lastIndexOf(".");
  return dot > 0 ? filename.slice(dot).toLowerCase() : "";
}

export function isAccepted(filename) {
  return EXTENSIONS.has(extensionOf(filename));
}

/** One line, never the server's list of media types. */
export function unsupportedMessage(filename) {
  const extension = extensionOf(filename);
  const what = extension ? `Files of type ${extension}` : "Files without an extension";
  return `${what} are not supported; supported: ${formatNames()}.`;
}
