// One answer as the Responses stream delivers it, and its renderings: badges, evidence colours, sources.
// It reads only the wire: file_search_call results, file_citation annotations with their _aicore
// segment fields (UTF-16 offsets, so JavaScript slices never split a character), and the legacy
// metadata._aicore.grounded_sources for the signed links.

import { el } from "./dom.js";

export const PALETTE_SIZE = 8;

export const STATES = {
  available: { label: "Grounded", tone: "ok" },
  hidden: { label: "Sources hidden", tone: "muted" },
  missing: { label: "No sources found", tone: "warn" },
  none: { label: "Not grounded", tone: "muted" },
};

export class Answer {
  constructor(question, model, namespace) {
    this.question = question;
    this.model = model;
    this.namespace = namespace; // the file_search namespace sent, or null for the bot's own
    this.text = "";
    this.annotations = [];
    this.retrieved = []; // file_search_call results in retrieval order ([Source N] numbers)
    this.final = null; // the response.completed response object
    this.error = null;
    this.chatReply = null; // the Chat Completions dialect, fetched when first shown
  }

  /** Feed one Responses SSE event; returns true once the stream is over. */
  feed(type, data) {
    switch (data.type || type) {
      case "response.output_item.done":
        if (data.item && data.item.type === "file_search_call") this.retrieved = data.item.results || [];
        return false;
      case "response.output_text.delta":
        this.text += data.delta;
        return false;
      case "response.output_text.annotation.added":
        this.annotations.push(data.annotation);
        return false;
      case "response.completed":
        this.adoptFinal(data.response);
        return true;
      case "error":
        this.error = data.message || "The answer failed.";
        return false;
      case "response.failed":
        this.error = this.error || (data.response && data.response.error && data.response.error.message) || "The answer failed.";
        return true;
      default:
        return false;
    }
  }

  adoptFinal(response) {
    this.final = response;
    const message = (response.output || []).find((item) => item.type === "message");
    const part = message && message.content && message.content[0];
    if (part) {
      this.text = part.text;
      this.annotations = (part.annotations || []).filter((a) => a._aicore);
    }
  }

  get aicore() {
    return (this.final && this.final.metadata && this.final.metadata._aicore) || {};
  }

  get state() {
    return this.aicore.grounded_sources_state || null;
  }

  /** Results in display order (source_index), as the finished response lists them. */
  get results() {
    const search = this.final && (this.final.output || []).find((item) => item.type === "file_search_call");
    return (search && search.results) || [];
  }

  /** What a badge for ``annotation`` shows: passage, document, locator, link. */
  sourceOf(annotation) {
    const core = annotation._aicore;
    const sameChunk = (r) => r.attributes && r.attributes.document_id === core.document_id && r.attributes.chunk_index === core.chunk_index;
    const result = this.results.find(sameChunk) || this.retrieved.find(sameChunk) || null;
    const grounded = (this.aicore.grounded_sources || []).find((s) => s.source_index === core.source_index) || null;
    return {
      index: core.source_index,
      filename: annotation.filename || (result && result.filename) || "",
      passage: result ? result.text : "",
      quote: annotation.quote || (annotation.file_citation && annotation.file_citation.quote) || "",
      quoteStart: core.quote_start,
      quoteEnd: core.quote_end,
      pageLabel: core.page_label,
      locator: core.locator_label || "",
      support: core.support_score,
      supported: core.supported,
      url: grounded && grounded.url ? pageLink(grounded.url, core.page_number) : null,
    };
  }

  /** Cited segments in text order: {start, end, annotations} with UTF-16 offsets. */
  segments() {
    const byKey = new Map();
    for (const annotation of this.annotations) {
      const core = annotation._aicore;
      const key = `${core.segment_start_utf16}:${core.segment_end_utf16}`;
      if (!byKey.has(key)) byKey.set(key, { start: core.segment_start_utf16, end: core.segment_end_utf16, annotations: [] });
      byKey.get(key).annotations.push(annotation);
    }
    return [...byKey.values()].sort((a, b) => a.start - b.start || a.end - b.end);
  }

  /** The answer with ``[Source N]`` after each cited segment, N the retrieval number (seed 004's dialect). */
  sourceMarkerText() {
    const retrievalNumber = (core) => {
      const i = this.retrieved.findIndex((r) => r.attributes && r.attributes.document_id === core.document_id && r.attributes.chunk_index === core.chunk_index);
      return i >= 0 ? i + 1 : null;
    };
    let out = "";
    let at = 0;
    for (const segment of [...this.segments()].sort((a, b) => a.end - b.end)) {
      const numbers = [...new Set(segment.annotations.map((a) => retrievalNumber(a._aicore)).filter((n) => n !== null))];
      if (!numbers.length) continue;
      out += this.text.slice(at, segment.end) + numbers.map((n) => ` [Source ${n}]`).join("");
      at = segment.end;
    }
    return out + this.text.slice(at);
  }
}

/** The signed link opened at ``page`` (the fragment is not signed, so it may change). */
export function pageLink(url, page) {
  if (!url.includes("#page=") || !page) return url;
  return url.replace(/#page=\d+$/, `#page=${page}`);
}

/** The answer text with a badge after each cited segment. ``onBadge(badge, source)`` wires each one. */
export function renderAnswerText(container, answer, onBadge) {
  container.replaceChildren();
  const text = answer.text;
  const ends = new Map();
  for (const segment of answer.segments()) {
    const list = ends.get(segment.end) || [];
    list.push(...segment.annotations);
    ends.set(segment.end, list);
  }
  let at = 0;
  for (const end of [...ends.keys()].sort((a, b) => a - b)) {
    if (end < at || end > text.length) continue;
    container.append(text.slice(at, end));
    const seen = new Set();
    const group = el("span", { class: "badges" });
    for (const annotation of ends.get(end)) {
      const source = answer.sourceOf(annotation);
      if (seen.has(source.index)) continue;
      seen.add(source.index);
      group.append(badge(source, onBadge));
    }
    container.append(group);
    at = end;
  }
  container.append(text.slice(at));
}

function badge(source, onBadge) {
  const where = source.pageLabel ? `page ${source.pageLabel}` : source.locator;
  const label = `Source ${source.index}: ${source.filename}${where ? `, ${where}` : ""}`;
  const tone = `src-${(source.index - 1) % PALETTE_SIZE}${source.supported === false ? " low" : ""}`;
  const attributes = { class: `badge ${tone}`, "data-citation": String(source.index), "aria-label": label };
  const node = source.url
    ? el("a", { ...attributes, href: source.url, target: "_blank", rel: "noopener noreferrer" }, String(source.index))
    : el("a", { ...attributes, tabindex: "0", role: "link", "aria-disabled": "true" }, String(source.index));
  onBadge(node, source);
  return node;
}

/** The popover's content: document, locator, support, and the quote emphasised inside its passage. */
export function popoverContent(source) {
  const head = el("div", { class: "popover-head" },
    el("span", { class: `badge static src-${(source.index - 1) % PALETTE_SIZE}` }, String(source.index)),
    el("span", { class: "popover-doc" }, source.filename),
  );
  const meta = el("div", { class: "popover-meta" });
  if (source.pageLabel) meta.append(el("span", { class: "popover-page" }, `Page ${source.pageLabel}`));
  else if (source.locator) meta.append(el("span", { class: "popover-page" }, source.locator));
  if (typeof source.support === "number") {
    meta.append(el("span", { class: source.supported === false ? "support low" : "support" },
      `Support ${source.support.toFixed(2)}${source.supported === false ? " · below threshold" : ""}`));
  }
  const passage = el("blockquote", { class: "popover-passage" }, ...quotedPassage(source));
  const hint = el("div", { class: "popover-hint" }, source.url ? "Click or press Enter to open the source at this page." : "The link appears when the answer is complete.");
  return [head, meta, passage, hint];
}

const CONTEXT = 260; // characters of passage shown on each side of the quote

function quotedPassage(source) {
  const passage = source.passage || "";
  let start = -1;
  let end = -1;
  // quote_start/quote_end are code-point offsets; Array.from splits by code point.
  if (Number.isInteger(source.quoteStart) && Number.isInteger(source.quoteEnd)) {
    const points = Array.from(passage);
    const before = points.slice(0, source.quoteStart).join("");
    const quote = points.slice(source.quoteStart, source.quoteEnd).join("");
    if (!source.quote || quote === source.quote) {
      start = before.length;
      end = start + quote.length;
    }
  }
  if (start < 0 && source.quote) {
    start = passage.indexOf(source.quote);
    end = start < 0 ? -1 : start + source.quote.length;
  }
  if (start < 0) return [el("mark", {}, source.quote || passage.slice(0, 2 * CONTEXT))];
  const from = Math.max(0, start - CONTEXT);
  const to = Math.min(passage.length, end + CONTEXT);
  // PDF text keeps its line breaks; a passage reads better as one paragraph.
  const flat = (text) => text.replace(/\s+/g, " ");
  return [
    (from > 0 ? "…" : "") + flat(passage.slice(from, start)),
    el("mark", {}, flat(passage.slice(start, end))),
    flat(passage.slice(end, to)) + (to < passage.length ? "…" : ""),
  ];
}

/** The evidence view: each cited segment coloured by its first source; low support outlined. */
export function renderEvidence(container, legend, answer) {
  container.replaceChildren();
  legend.replaceChildren();
  const text = answer.text;
  const used = new Map();
  let at = 0;
  for (const segment of answer.segments()) {
    if (segment.start < at) continue; // overlapping segments: the first one wins
    container.append(text.slice(at, segment.start));
    const sources = segment.annotations.map((a) => answer.sourceOf(a));
    const first = sources[0];
    const low = sources.some((s) => s.supported === false);
    const scores = sources.map((s) => `source ${s.index} support ${typeof s.support === "number" ? s.support.toFixed(2) : "?"}`).join(", ");
    const span = el("span", {
      class: `segment src-${(first.index - 1) % PALETTE_SIZE}${low ? " low" : ""}`,
      "data-source": String(first.index),
      title: `${low ? "Low support: " : ""}${scores}`,
    }, text.slice(segment.start, segment.end));
    container.append(span);
    if (low) container.append(el("span", { class: "low-flag", "aria-label": "low support" }, "⚠ low support"));
    for (const s of sources) if (!used.has(s.index)) used.set(s.index, s);
    at = segment.end;
  }
  container.append(text.slice(at));
  for (const s of [...used.values()].sort((a, b) => a.index - b.index)) {
    const where = s.pageLabel ? `p. ${s.pageLabel}` : s.locator;
    legend.append(el("li", {},
      el("span", { class: `swatch src-${(s.index - 1) % PALETTE_SIZE}`, "aria-hidden": "true" }),
      `[${s.index}] ${s.filename}${where ? ` — ${where}` : ""}`));
  }
  if (text && !answer.segments().length) legend.append(el("li", { class: "subtle" }, "No sentence of this answer cites a source."));
}

/** The sources panel's list: cited sources, then the other retrieved passages folded away. */
export function renderSources(list, answer) {
  list.replaceChildren();
  const sources = answer.aicore.grounded_sources || [];
  const byIndex = new Map(answer.results.map((r) => [r.attributes && r.attributes.source_index, r]));
  const item = (source) => {
    const result = byIndex.get(source.source_index);
    const where = source.page_label ? `p. ${source.page_label}` : source.locator_label;
    const link = source.url
      ? el("a", { href: source.url, target: "_blank", rel: "noopener noreferrer", class: "source-link" }, source.filename)
      : el("span", { class: "source-link" }, source.filename);
    return el("li", { class: source.cited ? "source cited" : "source" },
      el("span", { class: `badge static src-${(source.source_index - 1) % PALETTE_SIZE}` }, String(source.source_index)),
      el("div", { class: "source-body" },
        el("div", { class: "source-title" }, link, where ? el("span", { class: "subtle" }, ` · ${where}`) : "",
          typeof source.score === "number" ? el("span", { class: "subtle" }, ` · relevance ${source.score.toFixed(2)}`) : ""),
        result ? el("div", { class: "source-preview" }, preview(result.text)) : ""));
  };
  const cited = sources.filter((s) => s.cited);
  const other = sources.filter((s) => !s.cited);
  list.append(...cited.map(item));
  if (other.length) {
    const more = el("ol", { class: "source-list" }, ...other.map(item));
    list.append(el("li", { class: "more" },
      el("details", {}, el("summary", {}, `${other.length} more retrieved, not cited`), more)));
  }
}

function preview(text) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 220 ? `${flat.slice(0, 220)}…` : flat;
}
