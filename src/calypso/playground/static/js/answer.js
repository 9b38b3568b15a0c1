// One answer as the Responses stream delivers it, and its renderings: badges, evidence colours, sources.
// It reads only the wire: file_search_call results, file_citation annotations with their _aicore
// segment fields (UTF-16 offsets, so JavaScript slices never split a character), and the legacy
// metadata._aicore.grounded_sources for the signed links, and metadata._aicore.claims for what each
// sentence rests on (the sentences nothing supports are marked in the text and listed in the evidence).

import { el } from "./dom.js";

export const PALETTE_SIZE = 8;

export const STATES = {
  available: { label: "Grounded", tone: "ok" },
  partial: { label: "Partly grounded", tone: "partial" }, // available, but some claim is unsupported or weak
  hidden: { label: "Sources hidden", tone: "muted" },
  missing: { label: "Not in the documents", tone: "warn" }, // nothing found, or the text is not backed by it
  none: { label: "Not grounded", tone: "muted" },
};

/** How an answer that never completed ended: the header's words, why (under it), what to do ``next``. */
export const ENDINGS = {
  unreachable: { label: "Server unreachable", tone: "warn", hint: () => "The server stopped answering.", next: " Retry when it is back." },
  broken: { label: "Connection lost", tone: "warn", hint: () => "The connection broke before the answer's end." },
  failed: { label: "Answer failed", tone: "warn", hint: (message) => message },
  stopped: { label: "Stopped", tone: "muted", hint: () => "Stopped before the end." },
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
    this.ending = null; // {kind, message} when the stream ended without response.completed (ENDINGS)
    this.chatReply = null; // the Chat Completions dialect, fetched when first shown
    this.sentences = []; // streamed output_text.sentence_status payloads, until the completed claims replace them
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
      case "response.output_text.sentence_status":
        if (data.sentence) this.sentences.push(data.sentence);
        return false;
      case "response.completed":
      case "response.incomplete": // cut at max_output_tokens: the answer so far, final all the same
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

  /** metadata._aicore.claims: support ("supported" | "partial" | "unsupported" | "no_claims"), counts, spans. */
  get claims() {
    return this.aicore.claims || null;
  }

  /** Seed 000's state, except that an available answer with an unsupported or weak claim is "partial". */
  get displayState() {
    const support = this.claims && this.claims.support;
    if (this.state === "available" && (support === "partial" || support === "unsupported")) return "partial";
    return this.state;
  }

  /** The sentences not to take as grounded, in text order, with UTF-16 offsets into ``text``: from the
   * completed claims, or while streaming from each sentence's status as it ends. */
  flagged() {
    const streamed = this.sentences.filter((s) => s.status === "unsupported" || s.status === "weak");
    const spans = this.final ? (this.claims && this.claims.unsupported_spans) || [] : streamed;
    const out = [];
    for (const span of [...spans].sort((a, b) => a.start_index_utf16 - b.start_index_utf16)) {
      const start = span.start_index_utf16;
      const end = Math.min(span.end_index_utf16, this.text.length);
      if (!Number.isInteger(start) || end <= start) continue;
      if (out.length && start < out[out.length - 1].end) continue; // overlapping: the first one wins
      out.push({ start, end, status: span.status, support: span.support_score, text: this.text.slice(start, end) });
    }
    return out;
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
      url: grounded && grounded.url ? quoteLink(grounded.url, core) : null,
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

/** A passage link of the viewer (``…/view?…&chunk=N``) turned into its quote's: ``quote_start``,
 * ``quote_end`` and ``page`` set from the annotation. Only expires and signature are signed, so these
 * may change; any other link (a crawled page's own URL) is left as it is. */
export function quoteLink(url, core) {
  let parsed;
  try {
    parsed = new URL(url, document.baseURI);
  } catch {
    return url;
  }
  if (!/\/v1\/files\/[^/]+\/view$/.test(parsed.pathname)) return url;
  if (Number.isInteger(core.quote_start) && Number.isInteger(core.quote_end) && core.quote_end > core.quote_start) {
    parsed.searchParams.set("quote_start", String(core.quote_start));
    parsed.searchParams.set("quote_end", String(core.quote_end));
  }
  if (Number.isInteger(core.page_number)) parsed.searchParams.set("page", String(core.page_number));
  return parsed.href;
}

const CLAIM_WORDS = {
  unsupported: { tag: "unsupported", title: "Unsupported: no retrieved passage supports this sentence." },
  weak: { tag: "weak support", title: "Weakly supported: its sources score below the server's support threshold." },
};

function claimTag(flag) {
  const words = CLAIM_WORDS[flag.status] || CLAIM_WORDS.unsupported;
  return el("span", { class: `claim-tag ${flag.status}`, title: words.title }, words.tag);
}

function claimSpan(flag) {
  const words = CLAIM_WORDS[flag.status] || CLAIM_WORDS.unsupported;
  return el("span", { class: `claim ${flag.status}`, "data-claim": flag.status, title: words.title });
}

/** The answer text with a badge after each cited segment, and each sentence nothing supports (or only
 * weakly) marked with its tag. ``onBadge(badge, source)`` wires each badge. */
export function renderAnswerText(container, answer, onBadge) {
  container.replaceChildren();
  const text = answer.text;
  const ends = new Map();
  for (const segment of answer.segments()) {
    if (segment.end > text.length) continue;
    const list = ends.get(segment.end) || [];
    list.push(...segment.annotations);
    ends.set(segment.end, list);
  }
  const flags = answer.flagged();
  const stops = new Set([...ends.keys(), ...flags.flatMap((f) => [f.start, f.end]), text.length]);
  let at = 0;
  let current = container; // the open claim span, or the container
  let flag = 0;
  for (const stop of [...stops].sort((a, b) => a - b)) {
    current.append(text.slice(at, stop));
    at = stop;
    let closed = null;
    if (current !== container && flags[flag - 1].end === stop) {
      closed = flags[flag - 1];
      current = container;
    }
    if (ends.has(stop)) current.append(badgeGroup(ends.get(stop), answer, onBadge));
    if (closed) container.append(claimTag(closed));
    if (current === container && flag < flags.length && flags[flag].start === stop) {
      current = claimSpan(flags[flag]);
      container.append(current);
      flag += 1;
    }
  }
}

function badgeGroup(annotations, answer, onBadge) {
  const seen = new Set();
  const group = el("span", { class: "badges" });
  for (const annotation of annotations) {
    const source = answer.sourceOf(annotation);
    if (seen.has(source.index)) continue;
    seen.add(source.index);
    group.append(badge(source, onBadge));
  }
  return group;
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
  const hint = el("div", { class: "popover-hint" }, source.url ? "Click or press Enter to open the passage with this quote highlighted." : "The link appears when the answer is complete.");
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

/** ``text[from:to]`` into ``container``, the unsupported sentences in it marked (weak ones are segments). */
function appendMarked(container, text, from, to, flags) {
  let at = from;
  for (const flag of flags) {
    if (flag.status !== "unsupported" || flag.end <= at || flag.start >= to) continue;
    const start = Math.max(flag.start, at);
    const end = Math.min(flag.end, to);
    container.append(text.slice(at, start));
    container.append(el("span", { class: "segment unsupported", "data-claim": "unsupported", title: CLAIM_WORDS.unsupported.title }, text.slice(start, end)));
    at = end;
  }
  container.append(text.slice(at, to));
}

/** The evidence view: each cited segment coloured by its first source; low support outlined; the
 * sentences no source supports marked, and listed under the legend. */
export function renderEvidence(container, legend, claimsList, answer) {
  container.replaceChildren();
  legend.replaceChildren();
  claimsList.replaceChildren();
  const text = answer.text;
  const flags = answer.flagged();
  const used = new Map();
  let at = 0;
  for (const segment of answer.segments()) {
    if (segment.start < at) continue; // overlapping segments: the first one wins
    appendMarked(container, text, at, segment.start, flags);
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
  appendMarked(container, text, at, text.length, flags);
  for (const s of [...used.values()].sort((a, b) => a.index - b.index)) {
    const where = s.pageLabel ? `p. ${s.pageLabel}` : s.locator;
    legend.append(el("li", {},
      el("span", { class: `swatch src-${(s.index - 1) % PALETTE_SIZE}`, "aria-hidden": "true" }),
      `[${s.index}] ${s.filename}${where ? ` — ${where}` : ""}`));
  }
  if (text && !answer.segments().length) legend.append(el("li", { class: "subtle" }, "No sentence of this answer cites a source."));
  renderClaimsList(claimsList, flags);
}

function renderClaimsList(list, flags) {
  const groups = [
    ["unsupported", "Not supported by any source"],
    ["weak", "Only weakly supported"],
  ];
  for (const [status, heading] of groups) {
    const items = flags.filter((f) => f.status === status);
    if (!items.length) continue;
    list.append(el("div", { class: `claims-group ${status}` },
      el("strong", {}, `${heading} (${items.length}):`),
      el("ul", {}, ...items.map((f) => el("li", { "data-claim": status }, f.text)))));
  }
  list.hidden = !list.childElementCount;
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
