// The playground: pick a bot, manage documents, ask, and check every citation.
// Only the public API is used: /v1/models, /v1/bots, /v1/documents, /v1/responses (streamed),
// /v1/chat/completions (dialect view) and the signed source links the answers carry.

import { Answer, ENDINGS, STATES, popoverContent, renderAnswerText, renderEvidence, renderSources } from "./answer.js";
import { ApiError, getJson, postJson, reachable, saveKey, savedKey, streamEvents } from "./api.js";
import { Documents } from "./documents.js";
import { Sources } from "./sources.js";
import { $, el } from "./dom.js";
import { formatNames } from "./formats.js";
import { keepFresh } from "./freshness.js";
import { citedBox, placePopover } from "./placement.js";

const DEFAULT_NAMESPACE = "general";

const state = {
  bots: new Map(), // id -> bot object from /v1/bots (when readable)
  namespaceEdited: false,
  answer: null,
  abort: null,
  view: "answer",
  dialect: "responses",
};

// -- alerts --------------------------------------------------------------------------------------

function showError(error) {
  const alert = $("alert");
  let message = error instanceof ApiError ? error.message : String(error && error.message ? error.message : error);
  if (error instanceof ApiError && error.status === 401) message += " Paste an API key at the top right.";
  alert.replaceChildren(el("span", {}, message), closeButton());
  alert.hidden = false;
}

function closeButton() {
  const button = el("button", { type: "button", class: "link-button", "aria-label": "Dismiss message" }, "Dismiss");
  button.addEventListener("click", () => {
    $("alert").hidden = true;
  });
  return button;
}

function clearError() {
  $("alert").hidden = true;
}

// -- API key ------------------------------------------------------------------------------------

function setupKey() {
  const input = $("api-key");
  input.value = savedKey();
  $("key-status").textContent = savedKey() ? "key saved in this browser" : "";
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    saveKey(input.value.trim());
    $("key-status").textContent = input.value.trim() ? "key saved in this browser" : "key cleared";
    clearError();
    loadBots();
  });
}

// -- bots and namespace -------------------------------------------------------------------------

const documents = new Documents({
  elements: {
    body: $("documents-body"),
    hiddenNote: $("documents-hidden"),
    uploads: $("uploads"),
    list: $("document-list"),
    input: $("file-input"),
    dropZone: $("drop-zone"),
    refresh: $("refresh-documents"),
  },
  namespace: currentNamespace,
  onError: showError,
});

const syncedSources = new Sources({
  elements: {
    list: $("source-rows"),
    form: $("source-form"),
    type: $("source-type"),
    origin: $("source-origin"),
    mailbox: $("source-mailbox"),
    username: $("source-username"),
    password: $("source-password"),
  },
  namespace: currentNamespace,
  onError: showError,
  onSynced: () => documents.refresh(),
});

function currentBot() {
  return state.bots.get($("bot-select").value) || null;
}

function currentNamespace() {
  return $("namespace").value.trim() || DEFAULT_NAMESPACE;
}

/** The namespace to send as a file_search tool: only when the user chose one other than the bot's. */
function toolNamespace() {
  const bot = currentBot();
  if (!state.namespaceEdited) return null;
  return bot && bot.namespace === currentNamespace() ? null : currentNamespace();
}

async function loadBots() {
  const select = $("bot-select");
  const previous = select.value;
  try {
    const models = await getJson("models");
    state.bots.clear();
    try {
      for (const bot of (await getJson("bots?limit=100")).data) state.bots.set(bot.id, bot);
    } catch {
      /* bot details are optional: the model list is enough to ask */
    }
    select.replaceChildren(...models.data.map((m) => el("option", { value: m.id }, m.id)));
    if (models.data.some((m) => m.id === previous)) select.value = previous;
    onBotChange();
  } catch (error) {
    showError(error);
  }
}

function onBotChange() {
  const bot = currentBot();
  state.namespaceEdited = false;
  $("namespace").value = (bot && bot.namespace) || DEFAULT_NAMESPACE;
  const details = [];
  if (bot) {
    details.push(bot.namespace ? `searches “${bot.namespace}”` : "no knowledge base");
    if (bot.sources_policy === "hidden") details.push("sources hidden by policy");
    if (bot.generator) details.push(`generator: ${bot.generator}`);
  }
  $("bot-details").textContent = details.join(" · ");
  updateNamespaceNote();
  documents.setHidden(Boolean(bot && bot.sources_policy === "hidden"));
  syncedSources.refresh();
}

function updateNamespaceNote() {
  const tool = toolNamespace();
  $("namespace-note").textContent = tool
    ? `Uploads go here, and answers search it (a file_search tool on “${tool}”).`
    : "Uploads go here; answers search the bot's own namespace.";
}

function setupBots() {
  $("bot-select").addEventListener("change", onBotChange);
  $("namespace").addEventListener("change", () => {
    state.namespaceEdited = true;
    updateNamespaceNote();
    documents.refresh();
    syncedSources.refresh();
  });
}

// -- asking -------------------------------------------------------------------------------------

function setupAsk() {
  const question = $("question");
  question.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("ask-form").requestSubmit();
    }
  });
  $("ask-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.abort) {
      state.abort.abort();
      return;
    }
    const text = question.value.trim();
    if (text) ask(text);
  });
  $("retry-button").addEventListener("click", retry);
}

async function ask(question, { model = $("bot-select").value, namespace = toolNamespace() } = {}) {
  clearError();
  hidePopover();
  const answer = new Answer(question, model, namespace);
  state.answer = answer;
  const payload = { model, input: question, stream: true };
  if (namespace) payload.tools = [{ type: "file_search", vector_store_ids: [namespace] }];

  const card = $("answer-card");
  card.hidden = false;
  card.setAttribute("aria-busy", "true");
  $("retry-button").hidden = true;
  // Nothing of the previous answer stays in the page (a hidden-sources answer must not sit beside old sources).
  $("sources").hidden = true;
  for (const id of ["source-list", "evidence-text", "evidence-legend", "evidence-claims", "dialect-output"]) $(id).replaceChildren();
  setState(null, "Searching and writing…");
  renderAll(answer);
  const button = $("ask-button");
  button.textContent = "Stop";
  state.abort = new AbortController();
  let frame = 0;
  try {
    await streamEvents("responses", payload, (type, data) => {
      if (state.answer !== answer) return;
      const over = answer.feed(type, data);
      if (over) renderAll(answer);
      else if (!frame) frame = requestAnimationFrame(() => {
        frame = 0;
        if (state.answer === answer) renderAll(answer);
      });
    }, state.abort.signal);
    if (!answer.final) answer.ending = answer.error ? { kind: "failed", message: answer.error } : { kind: "broken" };
  } catch (error) {
    answer.ending = await endingOf(error, answer);
  } finally {
    if (frame) cancelAnimationFrame(frame);
    state.abort = null;
    button.textContent = "Ask";
    if (state.answer === answer) {
      card.setAttribute("aria-busy", "false");
      renderAll(answer);
    }
  }
}

/** Why a stream threw: the user stopped it, the API refused the question, or the connection went. */
async function endingOf(error, answer) {
  if (error.name === "AbortError") return { kind: "stopped" };
  if (error instanceof ApiError) {
    if (!answer.text) showError(error); // refused before any answer: the alert says why (a 401 asks for a key)
    return { kind: "failed", message: error.message };
  }
  // fetch's TypeError ("network error", "Failed to fetch") says nothing: ask whether the server is still there.
  return { kind: (await reachable()) ? "broken" : "unreachable" };
}

function retry() {
  const answer = state.answer;
  if (!answer || state.abort) return;
  $("question").focus(); // Retry hides itself: focus must not fall to the page's top
  ask(answer.question, { model: answer.model, namespace: answer.namespace });
}

function setState(grounding, hint) {
  const badge = $("state-badge");
  const info = STATES[grounding];
  badge.textContent = info ? info.label : "Answering…";
  badge.dataset.tone = info ? info.tone : "busy";
  $("state-hint").textContent = hint || "";
}

/** The server's hint, and for a partly grounded answer what is not supported and how much is. */
function stateHint(answer) {
  let hint = answer.aicore.grounded_sources_hint || "";
  const claims = answer.claims;
  const weakCitation = answer.annotations.some((a) => a._aicore.supported === false);
  if (answer.displayState === "partial" && claims) {
    const total = claims.supported + claims.weak + claims.unsupported;
    const parts = [];
    if (claims.unsupported) parts.push(`${claims.unsupported} of ${total} claims ${claims.unsupported === 1 ? "is" : "are"} not supported by any source`);
    if (claims.weak) parts.push(`${claims.weak} of ${total} ${claims.weak === 1 ? "is" : "are"} only weakly supported`);
    const coverage = typeof claims.coverage === "number" ? `; ${Math.round(claims.coverage * 100)}% of the claim text is supported` : "";
    hint = `${parts.join(", ")}${coverage}. The sentences are marked; see Evidence for the list.`;
    hint = hint.charAt(0).toUpperCase() + hint.slice(1);
  } else if (answer.state === "available" && weakCitation) {
    hint += " Some sentences are only weakly supported by their source: see Evidence.";
  } else if (answer.state === "missing" && claims && claims.supported + claims.weak + claims.unsupported > 0) {
    // The model answered anyway: its text stays, marked, and the reader is told the documents do not back it.
    hint += " The answer is shown as the model wrote it; its sentences are marked.";
  }
  return hint;
}

function renderAll(answer) {
  renderAnswerText($("answer-text"), answer, wireBadge);
  if (!answer.final) {
    if (answer.ending) renderEnding(answer);
    else if (!answer.text) $("answer-text").append(el("span", { class: "subtle" }, "…"));
    return;
  }
  const grounding = answer.state;
  setState(answer.displayState, stateHint(answer));
  // Seed 000: a sources panel only when the state is available; otherwise nothing of the sources is kept.
  const sources = $("sources");
  if (grounding === "available") {
    renderSources($("source-list"), answer);
    sources.hidden = false;
  } else {
    $("source-list").replaceChildren();
    sources.hidden = true;
  }
  if (grounding === "hidden") documents.setHidden(true);
  renderEvidence($("evidence-text"), $("evidence-legend"), $("evidence-claims"), answer);
  renderDialect();
}

/** An answer that will not complete: kept as far as it came, marked cut off, with a Retry. */
function renderEnding(answer) {
  const ending = ENDINGS[answer.ending.kind];
  $("state-badge").textContent = ending.label;
  $("state-badge").dataset.tone = ending.tone;
  const kept = answer.text ? " What came is kept, marked cut off." : "";
  $("state-hint").textContent = `${ending.hint(answer.ending.message || "")}${kept}${ending.next || ""}`;
  $("answer-text").append(el("span", { class: "cut-off" }, answer.text ? "cut off" : "no answer"));
  $("retry-button").hidden = false;
}

// -- citation popover ---------------------------------------------------------------------------

let popoverOwner = null;

function wireBadge(badge, source) {
  const show = () => showPopover(badge, source);
  badge.addEventListener("mouseenter", show);
  badge.addEventListener("focus", show);
  badge.addEventListener("mouseleave", () => {
    if (document.activeElement !== badge) hidePopover();
  });
  badge.addEventListener("blur", hidePopover);
  badge.addEventListener("keydown", (event) => {
    if (event.key === "Escape") hidePopover();
  });
  if (!source.url) badge.addEventListener("click", (event) => event.preventDefault());
}

function showPopover(badge, source) {
  const popover = $("citation-popover");
  popover.replaceChildren(...popoverContent(source));
  popover.hidden = false;
  if (popoverOwner && popoverOwner !== badge) popoverOwner.removeAttribute("aria-describedby");
  popoverOwner = badge;
  badge.setAttribute("aria-describedby", "citation-popover");
  const text = $("answer-text");
  const place = placePopover({
    text: text.getBoundingClientRect(),
    cited: citedBox(badge, text),
    viewport: { width: document.documentElement.clientWidth, height: window.innerHeight },
    measure: (width) => {
      popover.style.width = `${width}px`;
      popover.style.maxHeight = "none";
      return popover.offsetHeight;
    },
  });
  popover.style.width = `${place.width}px`;
  popover.style.maxHeight = `${place.maxHeight}px`;
  popover.style.left = `${place.left + window.scrollX}px`;
  popover.style.top = `${place.top + window.scrollY}px`;
  popover.dataset.side = place.side;
  // The passage box scrolls: start it at the quote, with a line of context above.
  const mark = popover.querySelector("blockquote mark");
  if (mark) mark.parentElement.scrollTop = Math.max(0, mark.offsetTop - mark.parentElement.offsetTop - 24);
}

function hidePopover() {
  const popover = $("citation-popover");
  popover.hidden = true;
  popover.replaceChildren(); // a hidden popover keeps no quote or filename in the page
  if (popoverOwner) popoverOwner.removeAttribute("aria-describedby");
  popoverOwner = null;
}

// -- views and dialects -------------------------------------------------------------------------

function setupViews() {
  for (const button of document.querySelectorAll(".view-button")) {
    button.addEventListener("click", () => {
      state.view = button.dataset.view;
      for (const other of document.querySelectorAll(".view-button")) {
        other.setAttribute("aria-pressed", String(other === button));
      }
      for (const view of ["answer", "evidence", "dialects"]) $(`view-${view}`).hidden = view !== state.view;
      hidePopover();
      renderDialect();
    });
  }
  for (const button of document.querySelectorAll(".dialect-button")) {
    button.addEventListener("click", () => {
      state.dialect = button.dataset.dialect;
      for (const other of document.querySelectorAll(".dialect-button")) {
        other.setAttribute("aria-pressed", String(other === button));
      }
      renderDialect();
    });
  }
}

async function renderDialect() {
  const output = $("dialect-output");
  const answer = state.answer;
  if (state.view !== "dialects" || !answer) return;
  if (!answer.final) {
    output.textContent = "The dialects appear when the answer is complete.";
    return;
  }
  if (state.dialect === "responses") {
    output.textContent = JSON.stringify(answer.final, null, 2);
  } else if (state.dialect === "source") {
    output.textContent = answer.state === "available" ? answer.sourceMarkerText() : answer.text;
  } else {
    if (answer.namespace) {
      output.textContent = `Chat Completions has no per-request namespace: it searches the bot's own. ` +
        `This answer searched “${answer.namespace}”; ask a bot whose namespace is “${answer.namespace}” to compare.`;
      return;
    }
    if (!answer.chatReply) {
      output.textContent = "Asking /v1/chat/completions…";
      try {
        answer.chatReply = await postJson("chat/completions", {
          model: answer.model,
          messages: [{ role: "user", content: answer.question }],
        });
      } catch (error) {
        answer.chatReply = { error: { message: error.message, type: error.type, code: error.code } };
      }
    }
    if (state.answer === answer && state.dialect === "chat") output.textContent = JSON.stringify(answer.chatReply, null, 2);
  }
}

// -- start --------------------------------------------------------------------------------------

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") hidePopover();
});
window.addEventListener("resize", hidePopover);
setupKey();
setupBots();
$("drop-hint").textContent = formatNames();
keepFresh(() => documents.refresh({ quiet: true })); // another tab's uploads and deletes show up here

setupAsk();
setupViews();
loadBots();
