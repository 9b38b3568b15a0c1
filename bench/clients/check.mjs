// Runs real JS clients against a running Calypso server and prints one
// PASS/FAIL line per case, with details indented below it.
//
//   cd bench/clients && npm install
//   CALYPSO_URL=http://127.0.0.1:8321/v1 node check.mjs
//
// Server: cd /tmp && calypso serve --demo --home /tmp/vhome --port 8321
// (auth is off on loopback, so any API key string works).
//
// Clients: openai-node (the newest major that runs on Node 20, plus 5.x as
// `openai-v5`), the Vercel AI SDK (`ai@5` + `@ai-sdk/openai@2`).
// Exit code: 0 when every case passes, 1 otherwise.

import OpenAI from "openai";
import OpenAIv5 from "openai-v5";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText } from "ai";
import { readFileSync } from "node:fs";

const BASE_URL = (process.env.CALYPSO_URL || "http://127.0.0.1:8321/v1").replace(/\/+$/, "");
const MODEL = process.env.CALYPSO_MODEL || "calypso-rag-agent";
const QUESTION = "How many days do customers have to request a full refund?";
const API_KEY = "x";

// Installed versions, read from node_modules (openai's "exports" map hides
// its package.json from require()).
const version = (name) => {
  try {
    return JSON.parse(readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url), "utf8")).version;
  } catch {
    return "?";
  }
};

// ---------------------------------------------------------------- helpers

const results = [];

function short(value, max = 240) {
  const s = typeof value === "string" ? value : JSON.stringify(value);
  if (s === undefined) return "undefined";
  return s.length > max ? `${s.slice(0, max)}… (${s.length} chars)` : s;
}

function errorText(err) {
  if (!err) return String(err);
  const parts = [`${err.name || "Error"}: ${err.message}`];
  // AI SDK errors carry the cause (e.g. a zod/type validation error) and,
  // for API call errors, the status and response body.
  if (err.statusCode) parts.push(`statusCode=${err.statusCode}`);
  if (err.status) parts.push(`status=${err.status}`);
  if (err.responseBody) parts.push(`responseBody=${short(err.responseBody, 600)}`);
  if (err.toolName) parts.push(`toolName=${err.toolName}`);
  if (err.availableTools !== undefined) parts.push(`availableTools=${JSON.stringify(err.availableTools)}`);
  if (err.cause && err.cause !== err) parts.push(`cause: ${errorText(err.cause)}`);
  return parts.join("\n      ");
}

async function runCase(id, title, fn) {
  const details = [];
  const log = (label, value) => details.push(`    ${label}: ${typeof value === "string" ? value : short(value, 600)}`);
  let pass = false;
  let note = "";
  try {
    const out = await fn(log);
    pass = !!out.pass;
    note = out.note || "";
  } catch (err) {
    pass = false;
    note = "threw";
    log("error", errorText(err));
  }
  results.push({ id, title, pass, note });
  console.log(`${pass ? "PASS" : "FAIL"}  ${id}  ${title}${note ? ` — ${note}` : ""}`);
  for (const line of details) console.log(line);
  console.log("");
}

function fileSearchScores(output) {
  const calls = (output || []).filter((item) => item.type === "file_search_call");
  const results = calls.flatMap((call) => call.results || []);
  const bad = results.filter((r) => typeof r.score !== "number" || !Number.isFinite(r.score));
  return { calls: calls.length, results: results.length, bad, scores: results.map((r) => r.score) };
}

function outputText(response) {
  if (typeof response.output_text === "string") return response.output_text;
  return (response.output || [])
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content || [])
    .filter((part) => part.type === "output_text")
    .map((part) => part.text)
    .join("");
}

function annotationsOf(response) {
  return (response.output || [])
    .filter((item) => item.type === "message")
    .flatMap((item) => item.content || [])
    .flatMap((part) => part.annotations || []);
}

// ------------------------------------------------- a. openai-node Responses

async function openaiResponsesCases(label, Client) {
  const client = new Client({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0 });

  await runCase(`a1/${label}`, "responses.create (non-streaming)", async (log) => {
    const response = await client.responses.create({ model: MODEL, input: QUESTION });
    const text = response.output_text;
    const annotations = annotationsOf(response);
    const fs = fileSearchScores(response.output);
    log("output_text", JSON.stringify(text));
    log("annotations", `${annotations.length} (${[...new Set(annotations.map((a) => a.type))].join(", ")})`);
    log("file_search_call", `${fs.calls} call(s), ${fs.results} result(s), scores ${JSON.stringify(fs.scores)}`);
    log("every result has a numeric score", fs.bad.length === 0 && fs.results > 0);
    const pass = typeof text === "string" && text.length > 0 && annotations.length > 0 && fs.results > 0 && fs.bad.length === 0;
    return { pass, note: `${annotations.length} annotation(s), ${fs.results} scored result(s)` };
  });

  await runCase(`a2/${label}`, "responses.create({stream: true})", async (log) => {
    const stream = await client.responses.create({ model: MODEL, input: QUESTION, stream: true });
    const types = [];
    let deltas = "";
    let completed = null;
    let annotationEvents = 0;
    let fsDoneResults = null;
    let lastSeq = -1;
    let seqOk = true;
    for await (const event of stream) {
      types.push(event.type);
      if (typeof event.sequence_number === "number") {
        if (event.sequence_number !== lastSeq + 1) seqOk = false;
        lastSeq = event.sequence_number;
      }
      if (event.type === "response.output_text.delta") deltas += event.delta;
      if (event.type === "response.output_text.annotation.added") annotationEvents += 1;
      if (event.type === "response.output_item.done" && event.item?.type === "file_search_call") {
        fsDoneResults = event.item.results || [];
      }
      if (event.type === "response.completed") completed = event.response;
    }
    const counts = {};
    for (const t of types) counts[t] = (counts[t] || 0) + 1;
    log("event types (in order, first occurrence)", [...new Set(types)].join(", "));
    log("event counts", counts);
    log("sequence_number contiguous from 0", seqOk);
    log("text from deltas", JSON.stringify(deltas));
    log("annotation.added events", annotationEvents);
    if (fsDoneResults) {
      log("output_item.done(file_search_call) scores", fsDoneResults.map((r) => r.score));
    }
    if (!completed) return { pass: false, note: "no response.completed event" };
    const finalText = outputText(completed);
    const fs = fileSearchScores(completed.output);
    const annotations = annotationsOf(completed);
    log("response.completed status", completed.status);
    log("response.completed output text", JSON.stringify(finalText));
    log("response.completed annotations", annotations.length);
    log("response.completed file_search scores", fs.scores);
    log("deltas == final text", deltas === finalText);
    const pass =
      completed.status === "completed" && finalText.length > 0 && deltas === finalText && fs.bad.length === 0 && fs.results > 0 &&
      annotations.length > 0 && types[0] === "response.created" && seqOk;
    return { pass, note: `${types.length} events, ${annotations.length} annotation(s) in response.completed` };
  });

  await runCase(`a3/${label}`, "responses.stream() helper + finalResponse()", async (log) => {
    // The SDK's own accumulator: rebuilds the response from the events and
    // throws if they are inconsistent (unknown item, delta before part, ...).
    const stream = client.responses.stream({ model: MODEL, input: QUESTION });
    let textDeltas = "";
    stream.on("response.output_text.delta", (e) => (textDeltas += e.delta));
    const final = await stream.finalResponse();
    const snapshotText = outputText({ output: final.output });
    const fs = fileSearchScores(final.output);
    log("finalResponse() output[].content[].text", JSON.stringify(snapshotText));
    log("finalResponse().output_text (SDK convenience, not sent by any server)", JSON.stringify(final.output_text));
    log("annotations", annotationsOf(final).length);
    log("file_search scores", fs.scores);
    log("deltas == accumulated text", textDeltas === snapshotText);
    const pass = snapshotText.length > 0 && textDeltas === snapshotText && annotationsOf(final).length > 0 && fs.bad.length === 0;
    const convenience = typeof final.output_text === "string" ? "output_text set" : "output_text undefined (this SDK version only adds it to non-streamed responses)";
    return { pass, note: pass ? `accumulated snapshot matches the deltas; ${convenience}` : "accumulated snapshot differs from the deltas" };
  });

  await runCase(`a4/${label}`, 'responses.create({include: ["inline_citations"]})', async (log) => {
    const response = await client.responses.create({ model: MODEL, input: QUESTION, include: ["inline_citations"] });
    const text = response.output_text;
    const annotations = annotationsOf(response);
    log("output_text", JSON.stringify(text));
    log("annotation types", annotations.map((a) => a.type));
    const spans = annotations.map((a) => ({ title: a.title, span: text.slice(a.start_index, a.end_index), url: a.url }));
    log("text.slice(start_index, end_index) per annotation", spans.map((s) => s.span));
    const linkOk = annotations.every(
      (a) => a.type === "url_citation" && text.slice(a.start_index, a.end_index) === `[[${a.title}]](${a.url})`,
    );
    log("every url_citation spans exactly its [[n]](url) link", linkOk);
    const pass = /\[\[\d+\]\]\(/.test(text) && annotations.length > 0 && linkOk;
    return { pass, note: `${annotations.length} url_citation(s) over [[n]](url) links` };
  });
}

// ------------------------------------------------- b. Vercel AI SDK

async function vercelCases() {
  const provider = createOpenAI({ baseURL: BASE_URL, apiKey: API_KEY });
  const fileSearchTool = () => ({ file_search: provider.tools.fileSearch({ vectorStoreIds: ["general"] }) });

  const describeSources = (sources) =>
    (sources || []).map((s) => ({
      sourceType: s.sourceType,
      title: short(s.title, 80),
      filename: s.filename,
      url: s.url,
      fileId: s.providerMetadata?.openai?.fileId,
    }));

  await runCase("b1", "AI SDK generateText, responses model, NO file_search tool declared", async (log) => {
    try {
      const result = await generateText({ model: provider.responses(MODEL), prompt: QUESTION, maxRetries: 0 });
      log("threw", false);
      log("text", JSON.stringify(result.text));
      log("sources", describeSources(result.sources));
      log("toolResults", result.toolResults?.map((t) => t.toolName));
      return { pass: result.text.length > 0, note: "did not throw" };
    } catch (err) {
      log("threw", true);
      log("exact error", errorText(err));
      return { pass: false, note: `throws ${err.name}; declare the file_search tool (b2)` };
    }
  });

  await runCase("b2", "AI SDK generateText, responses model, tools: { file_search: provider.tools.fileSearch(...) }", async (log) => {
    const result = await generateText({ model: provider.responses(MODEL), prompt: QUESTION, tools: fileSearchTool(), maxRetries: 0 });
    log("text", JSON.stringify(result.text));
    log("sources", `${result.sources.length}: ${short(describeSources(result.sources), 600)}`);
    const tr = result.toolResults || [];
    log("toolResults", tr.map((t) => ({ toolName: t.toolName, providerExecuted: t.providerExecuted, results: t.output?.results?.length, scores: t.output?.results?.map((r) => r.score) })));
    log("finishReason", result.finishReason);
    return { pass: result.text.length > 0 && result.sources.length > 0, note: `parses; ${result.sources.length} source(s)` };
  });

  await runCase("b3", "AI SDK streamText, responses model, file_search tool declared", async (log) => {
    const errors = []; // error parts of fullStream
    const onErrorCalls = [];
    const result = streamText({
      model: provider.responses(MODEL),
      prompt: QUESTION,
      tools: fileSearchTool(),
      maxRetries: 0,
      onError: ({ error }) => onErrorCalls.push(error),
    });
    const partTypes = {};
    let text = "";
    const sources = [];
    for await (const part of result.fullStream) {
      partTypes[part.type] = (partTypes[part.type] || 0) + 1;
      if (part.type === "text-delta") text += part.text;
      if (part.type === "source") sources.push(part);
      if (part.type === "error") errors.push(part.error);
    }
    log("text", JSON.stringify(text));
    log("fullStream part types", partTypes);
    log("sources", `${sources.length}: ${short(describeSources(sources), 600)}`);
    log("error parts", errors.length === 0 ? "none" : errors.map(errorText).join("\n      ---\n      "));
    log("onError calls", onErrorCalls.length);
    const finalText = await result.text;
    log("await result.text == streamed text", finalText === text);
    // tool-result and source parts only appear when @ai-sdk/openai's chunk
    // schema accepted output_item.done(file_search_call) and annotation.added
    // (events it cannot parse fall back silently to "unknown_chunk").
    const parsed = (partTypes["tool-result"] || 0) > 0 && sources.length > 0;
    log("file_search_call and annotation events parsed by the chunk schema", parsed);
    return { pass: text.length > 0 && errors.length === 0 && parsed, note: `${errors.length} error(s), ${sources.length} source(s)` };
  });

  await runCase("b4", "AI SDK streamText, responses model, NO tool declared (extra)", async (log) => {
    const onErrorCalls = [];
    const errorParts = [];
    const result = streamText({ model: provider.responses(MODEL), prompt: QUESTION, maxRetries: 0, onError: ({ error }) => onErrorCalls.push(error) });
    let text = "";
    const partTypes = {};
    for await (const part of result.fullStream) {
      partTypes[part.type] = (partTypes[part.type] || 0) + 1;
      if (part.type === "text-delta") text += part.text;
      if (part.type === "error") errorParts.push(part.error);
    }
    log("text", JSON.stringify(text));
    log("fullStream part types", partTypes);
    log("error parts", errorParts.length === 0 ? "none" : errorParts.map(errorText).join("\n      ---\n      "));
    log("onError calls", onErrorCalls.length);
    return { pass: text.length > 0 && errorParts.length === 0, note: `${errorParts.length} error part(s); text still streamed: ${text.length > 0}` };
  });

  await runCase("b5", "AI SDK generateText, provider.chat() model (Chat Completions, extra)", async (log) => {
    const result = await generateText({ model: provider.chat(MODEL), prompt: QUESTION, maxRetries: 0 });
    log("text", JSON.stringify(result.text));
    log("sources", `${result.sources.length}: ${short(describeSources(result.sources), 600)}`);
    return { pass: result.text.length > 0, note: `${result.sources.length} source(s)` };
  });

  await runCase("b6", "AI SDK generateText, file_search tool declared under another key (`kb`, extra)", async (log) => {
    // @ai-sdk/openai names the provider-executed call "file_search" whatever
    // key the tool was declared under, so the key must be `file_search`.
    try {
      const result = await generateText({
        model: provider.responses(MODEL),
        prompt: QUESTION,
        tools: { kb: provider.tools.fileSearch({ vectorStoreIds: ["general"] }) },
        maxRetries: 0,
      });
      log("threw", false);
      log("text", JSON.stringify(result.text));
      return { pass: result.text.length > 0, note: "did not throw" };
    } catch (err) {
      log("threw", true);
      log("exact error", errorText(err));
      return { pass: false, note: `throws ${err.name}; the tools key must be \`file_search\`` };
    }
  });
}

// ------------------------------------------------- c. openai-node Chat Completions

async function openaiChatCases(label, Client) {
  const client = new Client({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0 });
  const messages = [{ role: "user", content: QUESTION }];

  await runCase(`c1/${label}`, "chat.completions.create (non-streaming)", async (log) => {
    const completion = await client.chat.completions.create({ model: MODEL, messages });
    const message = completion.choices[0].message;
    log("content", JSON.stringify(message.content));
    log("citations (extra field)", message.citations);
    log("annotations", message.annotations);
    const annOk = (message.annotations || []).every(
      (a) => a.type === "url_citation" && typeof a.url_citation?.url === "string" && a.url_citation.end_index <= message.content.length,
    );
    const pass = !!message.content && Array.isArray(message.citations) && message.citations.length > 0 && message.annotations?.length > 0 && annOk;
    return { pass, note: `${message.citations?.length ?? "no"} citation(s), ${message.annotations?.length ?? "no"} annotation(s)` };
  });

  await runCase(`c2/${label}`, "chat.completions.create({stream: true})", async (log) => {
    const stream = await client.chat.completions.create({ model: MODEL, messages, stream: true, stream_options: { include_usage: true } });
    let content = "";
    let citations;
    let annotations;
    let finish = null;
    let chunks = 0;
    let usage = null;
    for await (const chunk of stream) {
      chunks += 1;
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      if (choice.delta?.content) content += choice.delta.content;
      if (choice.delta?.annotations) annotations = (annotations || []).concat(choice.delta.annotations);
      if (choice.delta && "citations" in choice.delta) citations = choice.delta.citations;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    log("chunks", chunks);
    log("content", JSON.stringify(content));
    log("delta.citations (finish chunk)", citations);
    log("delta.annotations", annotations);
    log("finish_reason", finish);
    log("usage", usage);
    const pass = content.length > 0 && Array.isArray(citations) && citations.length > 0 && annotations?.length > 0 && finish === "stop";
    return { pass, note: `${citations?.length ?? "no"} citation(s), ${annotations?.length ?? "no"} annotation(s)` };
  });
}

// ---------------------------------------------------------------- main

console.log(`Calypso client compatibility check`);
console.log(`date: ${new Date().toISOString()}`);
console.log(`node: ${process.version}`);
console.log(`base URL: ${BASE_URL}   model: ${MODEL}`);
console.log(
  `clients: openai@${version("openai")}, openai-v5 (openai@${version("openai-v5")}), ai@${version("ai")}, @ai-sdk/openai@${version("@ai-sdk/openai")}`,
);
console.log(`question: ${JSON.stringify(QUESTION)}`);
console.log("");

await openaiResponsesCases(`openai@${version("openai")}`, OpenAI);
await openaiResponsesCases(`openai@${version("openai-v5")}`, OpenAIv5);
await vercelCases();
await openaiChatCases(`openai@${version("openai")}`, OpenAI);
await openaiChatCases(`openai@${version("openai-v5")}`, OpenAIv5);

console.log("Summary");
for (const r of results) console.log(`  ${r.pass ? "PASS" : "FAIL"}  ${r.id}  ${r.note}`);
const failed = results.filter((r) => !r.pass).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
