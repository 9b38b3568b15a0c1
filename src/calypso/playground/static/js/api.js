// The public /v1 API, as the page uses it: JSON calls, one SSE stream, uploads with progress.
// Every call carries the API key from localStorage when one is saved; none is needed on loopback.

const KEY_STORAGE = "calypso.playground.apiKey";
const BASE = "v1/"; // relative: works at / and /playground, and behind a path prefix

export const UNREACHABLE = "The server is unreachable.";

export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.type = error.type || null;
    this.param = error.param || null;
    this.code = error.code || null;
  }
}

export function savedKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || "";
  } catch {
    return ""; // storage disabled: the key lives only in the field
  }
}

export function saveKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORAGE, key);
    else localStorage.removeItem(KEY_STORAGE);
  } catch {
    /* storage disabled */
  }
}

function headers(extra = {}) {
  const key = savedKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function parse(response) {
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export async function getJson(path) {
  return parse(await fetch(BASE + path, { headers: headers() }));
}

export async function postJson(path, payload) {
  const response = await fetch(BASE + path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(payload),
  });
  return parse(response);
}

export async function deleteJson(path) {
  return parse(await fetch(BASE + path, { method: "DELETE", headers: headers() }));
}

/** Every page of a list endpoint (``after`` cursors), up to ``max`` items. */
export async function listAll(path, max = 1000) {
  const items = [];
  let after = null;
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await getJson(`${path}${sep}limit=100${after ? `&after=${encodeURIComponent(after)}` : ""}`);
    items.push(...page.data);
    if (!page.has_more || items.length >= max || !page.last_id) return items;
    after = page.last_id;
  }
}

/**
 * POST /v1/documents as multipart, reporting upload progress (fetch cannot report it; XHR can).
 * Resolves with the document JSON (in_progress at first; the caller follows its status).
 */
export function uploadDocument(file, namespace, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("namespace", namespace);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", BASE + "documents");
    for (const [name, value] of Object.entries(headers())) xhr.setRequestHeader(name, value);
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null;
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(xhr.status, body));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, { error: { message: UNREACHABLE } })));
    xhr.send(form);
  });
}

/** Whether the server answers at all (after a stream broke: did the server go, or only the connection?). */
export async function reachable() {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      await fetch(BASE + "models", { headers: headers(), cache: "no-store" });
      return true; // any HTTP answer, even an error, means the server is there
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 300)); // a pooled connection may have died with the stream
    }
  }
  return false;
}

/**
 * POST a streaming request and call ``onEvent(type, data)`` for each SSE event, in order.
 * Resolves when the stream ends. SSE framing: events are separated by a blank line;
 * ``data:`` lines are joined with newlines.
 */
export async function streamEvents(path, payload, onEvent, signal) {
  const response = await fetch(BASE + path, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(payload),
    signal,
  });
  if (!response.ok) await parse(response); // throws the API's error
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      dispatch(block, onEvent);
    }
  }
  if (buffer.trim()) dispatch(buffer, onEvent);
}

function dispatch(block, onEvent) {
  let type = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue; // comment / keep-alive
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") type = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return;
  const raw = data.join("\n");
  if (raw === "[DONE]") return;
  onEvent(type, JSON.parse(raw));
}
