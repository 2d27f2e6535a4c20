// The official OpenAI SDK (npm `openai`) against PersistentKV's router, as an outside client.
//   node sdk_check.mjs --base-url http://127.0.0.1:PORT/v1 --api-key KEY --model NAME [--chat]
// The router must run with that API key, --max_inflight=1 and a short --queue_timeout (so a
// request that meets a long stream is refused: the 429 check), and workers whose model has a chat
// template when --chat.
// Prints one line per check; exits 1 at the first failure.
import OpenAI from "openai";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]?.startsWith("--") ? true : all[i + 1] ?? true]);
    return acc;
  }, []));
const baseURL = args["base-url"];
const model = args.model;
const client = new OpenAI({ baseURL, apiKey: args["api-key"], maxRetries: 0, timeout: 60000 });

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function expectError(promise, Type, status, what) {
  try {
    await promise;
  } catch (e) {
    check(e instanceof Type, `${what}: ${e?.constructor?.name} is a ${Type.name} (${e?.message})`);
    check(e.status === status, `${what}: status ${e.status} == ${status}`);
    check(typeof e.error?.message === "string" && e.error.message.length > 0,
      `${what}: the error has a message`);
    console.log(`ok: ${what} -> ${Type.name} ${e.status}: ${e.error.message}`);
    return e;
  }
  throw new Error(`${what}: no error`);
}

async function streamChat() {
  const stream = await client.chat.completions.create({
    model, stream: true, max_tokens: 8, temperature: 0, ignore_eos: true,
    stream_options: { include_usage: true },
    messages: [{ role: "system", content: "You are terse." }, { role: "user", content: "Hello there" }],
  });
  let text = "", role = null, finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    check(chunk.object === "chat.completion.chunk", "chat chunk object");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      role ??= c.delta.role ?? null;
      text += c.delta.content ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  check(role === "assistant", `first delta has role assistant (got ${role})`);
  check(finish === "length", `chat finish_reason length (got ${finish})`);
  check(usage && usage.completion_tokens === 8 && usage.prompt_tokens > 0,
    `chat usage ${JSON.stringify(usage)}`);
  console.log(`ok: streamed chat: ${chunks} chunks, ${usage.prompt_tokens}+${usage.completion_tokens} tokens, ${JSON.stringify(text)}`);
}

async function streamCompletion() {
  const stream = await client.completions.create({
    model, prompt: "Once upon a time", stream: true, max_tokens: 6, temperature: 0, ignore_eos: true,
  });
  let text = "", finish = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    check(chunk.object === "text_completion", "completion chunk object");
    for (const c of chunk.choices) {
      text += c.text;
      finish = c.finish_reason ?? finish;
    }
  }
  check(finish === "length", `completion finish_reason length (got ${finish})`);
  check(chunks >= 2, `token chunks and the finish chunk (${chunks})`);
  // The same request whole, greedy: the same text.
  const whole = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 6, temperature: 0, ignore_eos: true, logprobs: 2,
  });
  check(whole.choices[0].text === text, `whole text ${JSON.stringify(whole.choices[0].text)} == streamed ${JSON.stringify(text)}`);
  check(whole.usage.completion_tokens === 6, "whole completion usage");
  const lp = whole.choices[0].logprobs;
  check(lp && lp.tokens.length === 6 && lp.token_logprobs.every((x) => x <= 0) &&
    lp.top_logprobs.every((t) => Object.keys(t).length >= 1), "completion logprobs");
  console.log(`ok: streamed and whole completion agree: ${JSON.stringify(text)}`);
}

async function wholeChat() {
  const r = await client.chat.completions.create({
    model, max_completion_tokens: 5, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 3,
    messages: [{ role: "user", content: [{ type: "text", text: "Describe" }, { type: "text", text: "a cat" }] }],
  });
  check(r.object === "chat.completion", "chat.completion object");
  check(r.choices[0].message.role === "assistant", "message role");
  check(r.choices[0].finish_reason === "length", "whole chat finish_reason");
  const content = r.choices[0].logprobs?.content;
  check(content?.length === 5 && content.every((t) => t.top_logprobs.length === 3 && Array.isArray(t.bytes)),
    "chat logprobs with 3 alternatives each");
  console.log(`ok: whole chat with logprobs: ${JSON.stringify(r.choices[0].message.content)}`);
}

async function models() {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  check(ids.includes(model), `models.list has ${model} (${ids})`);
  console.log(`ok: models.list: ${ids}`);
}

async function errors() {
  await expectError(client.completions.create({ model, prompt: "x", max_tokens: 4, temperature: 5 }),
    OpenAI.BadRequestError, 400, "temperature 5");
  const e = await expectError(client.chat.completions.create({ model, max_tokens: 4, messages: [] }),
    OpenAI.BadRequestError, 400, "empty messages");
  check(e.param === "messages", `param names the field (${e.param})`);
  await expectError(client.completions.create({ model: "no-such-model", prompt: "x", max_tokens: 4 }),
    OpenAI.NotFoundError, 404, "unknown model");
  const stranger = new OpenAI({ baseURL, apiKey: "sk-wrong", maxRetries: 0 });
  await expectError(stranger.completions.create({ model, prompt: "x", max_tokens: 4 }),
    OpenAI.AuthenticationError, 401, "wrong API key");
  // Admission is 1 stream and a short queue wait: a long stream holds the slot, the next request
  // times out in the queue.
  const holder = await client.completions.create({
    model, prompt: "hold", stream: true, ignore_eos: true,  // no max_tokens: up to the context
  });
  const iterator = holder[Symbol.asyncIterator]();
  await iterator.next();  // the first token: the slot is taken
  const limited = await expectError(client.completions.create({ model, prompt: "x", max_tokens: 4 }),
    OpenAI.RateLimitError, 429, "admission full");
  check(Number(limited.headers?.get?.("retry-after")) >= 1, "429 carries Retry-After");
  holder.controller.abort();  // the client leaves: the router cancels the worker's stream
  console.log("ok: aborted the holder stream");
}

async function noTemplate() {
  await expectError(client.chat.completions.create({ model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
    OpenAI.BadRequestError, 400, "chat without a chat template");
}

try {
  await models();
  if (args.chat) {
    await streamChat();
    await wholeChat();
  } else {
    await noTemplate();
  }
  await streamCompletion();
  await errors();
  console.log("sdk_check: all checks passed");
} catch (e) {
  console.error(`sdk_check: ${e.stack ?? e}`);
  process.exit(1);
}
