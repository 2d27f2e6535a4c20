// pkv-chat-render: renders every conversation of a JSONL corpus with a chat template and prints
// one JSON value per line: the rendered text as a JSON string, or {"error": "..."} when rendering
// failed. Used by the agreement test against jinja2 and @huggingface/jinja.
//   pkv-chat-render [--now UNIX_SECONDS] [--bos TEXT] [--eos TEXT] TEMPLATE CORPUS.jsonl
//   pkv-chat-render [--now ...] --snippets SNIPPETS.txt CORPUS.jsonl
// TEMPLATE: a .jinja file, a tokenizer_config.json, or a model directory. Each corpus line is an
// object {"messages": [...], "add_generation_prompt": bool, ...}; its other members are passed as
// extra template variables (tools, enable_thinking, ...). With --snippets every line of
// SNIPPETS.txt is a template of its own (lines starting with "## " are comments), rendered with
// every corpus line in turn.
//   pkv-chat-render --tokenize MODEL_DIR CORPUS.jsonl
// With --tokenize, prints the prompt ids the worker would feed for each conversation, as a JSON
// array per line (or {"error": "..."}): the model folder's template (bos_token/eos_token from its
// tokenizer_config.json) and tokenizer, through the worker's own ChatPromptRenderer
// (worker/engine/chat_prompt.h): Tokenize(pkv.v1.ChatPrompt) for conversations that a ChatPrompt
// can carry (messages of string role and content only, no variables besides
// add_generation_prompt), TokenizeJson otherwise. Templates reading strftime_now see the clock.
// Used by the chat tokenization agreement test against transformers.js.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "chat_template/json_dump.h"
#include "chat_template/model_chat_template.h"
#include "chat_template/template.h"
#include "common/json.h"
#include "worker/engine/chat_prompt.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "pkv-chat-render: %s\n", msg.c_str());
  return 1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::optional<pkv::chat::ModelChatTemplate>> LoadTemplate(const std::string& path) {
  if (absl::EndsWith(path, ".json")) {
    return pkv::chat::ParseTokenizerConfigChatTemplate(ReadAll(path), path, std::nullopt);
  }
  if (absl::EndsWith(path, ".jinja")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return absl::NotFoundError(path + ": cannot open");
    pkv::chat::ModelChatTemplate model;
    model.source = ReadAll(path);
    return std::optional<pkv::chat::ModelChatTemplate>(std::move(model));
  }
  return pkv::chat::LoadModelChatTemplate(path);
}

std::string RenderLine(const pkv::chat::ChatTemplate& tmpl,
                       const pkv::chat::ModelChatTemplate& model, const std::string& line,
                       const pkv::chat::RenderOptions& options) {
  std::string out;
  absl::StatusOr<pkv::JsonValue> conv = pkv::ParseJson(line);
  absl::StatusOr<std::string> text = absl::InvalidArgumentError("corpus line is not an object");
  if (conv.ok() && conv->is_object()) {
    const pkv::JsonValue* messages = conv->Find("messages");
    const pkv::JsonValue* agp = conv->Find("add_generation_prompt");
    std::vector<pkv::JsonValue::Member> extra;
    for (const auto& m : conv->members()) {
      if (m.first != "messages" && m.first != "add_generation_prompt") extra.push_back(m);
    }
    text = pkv::chat::RenderChat(tmpl, model, messages ? *messages : pkv::JsonValue(),
                                 agp != nullptr && agp->is_bool() && agp->bool_value(),
                                 pkv::JsonValue::Object(std::move(extra)), options);
  }
  if (text.ok()) {
    pkv::chat::AppendJsonString(*text, &out);
    return out;
  }
  out = "{\"error\": ";
  pkv::chat::AppendJsonString(std::string(text.status().message()), &out);
  return out + "}";
}

void RenderAll(const absl::StatusOr<pkv::chat::ChatTemplate>& tmpl,
               const pkv::chat::ModelChatTemplate& model, const std::vector<std::string>& corpus,
               const pkv::chat::RenderOptions& options) {
  for (const std::string& line : corpus) {
    if (!tmpl.ok()) {
      std::string out = "{\"error\": ";
      pkv::chat::AppendJsonString(std::string(tmpl.status().message()), &out);
      std::cout << out << "}\n";
      continue;
    }
    std::cout << RenderLine(*tmpl, model, line, options) << "\n";
  }
}

std::vector<std::string> ReadLines(const std::string& path, bool skip_comments) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || (skip_comments && line.rfind("## ", 0) == 0)) continue;
    lines.push_back(line);
  }
  return lines;
}

// The conversation as the pkv.v1.ChatPrompt the router would send, when one can carry it exactly.
std::optional<pkv::v1::ChatPrompt> AsChatPrompt(const pkv::JsonValue& conv) {
  const pkv::JsonValue* messages = conv.Find("messages");
  if (messages == nullptr || !messages->is_array()) return std::nullopt;
  pkv::v1::ChatPrompt chat;
  for (const auto& m : conv.members()) {
    if (m.first == "add_generation_prompt" && m.second.is_bool()) {
      chat.set_add_generation_prompt(m.second.bool_value());
    } else if (m.first != "messages") {
      return std::nullopt;
    }
  }
  for (const pkv::JsonValue& m : messages->items()) {
    const pkv::JsonValue* role = m.is_object() ? m.Find("role") : nullptr;
    const pkv::JsonValue* content = m.is_object() ? m.Find("content") : nullptr;
    if (role == nullptr || content == nullptr || !role->is_string() || !content->is_string() ||
        m.members().size() != 2) {
      return std::nullopt;
    }
    pkv::v1::ChatMessage* out = chat.add_messages();
    out->set_role(role->str());
    out->set_content(content->str());
  }
  return chat;
}

absl::StatusOr<std::vector<int32_t>> TokenizeLine(const pkv::ChatPromptRenderer& renderer,
                                                  const pkv::Tokenizer& tokenizer,
                                                  const std::string& line, int* num_proto) {
  absl::StatusOr<pkv::JsonValue> conv = pkv::ParseJson(line);
  if (!conv.ok() || !conv->is_object()) {
    return absl::InvalidArgumentError("corpus line is not an object");
  }
  if (std::optional<pkv::v1::ChatPrompt> chat = AsChatPrompt(*conv)) {
    ++*num_proto;
    return renderer.Tokenize(*chat, tokenizer);
  }
  const pkv::JsonValue* messages = conv->Find("messages");
  const pkv::JsonValue* agp = conv->Find("add_generation_prompt");
  std::vector<pkv::JsonValue::Member> extra;
  for (const auto& m : conv->members()) {
    if (m.first != "messages" && m.first != "add_generation_prompt") extra.push_back(m);
  }
  return renderer.TokenizeJson(messages ? *messages : pkv::JsonValue(),
                               agp != nullptr && agp->is_bool() && agp->bool_value(),
                               pkv::JsonValue::Object(std::move(extra)), tokenizer);
}

int TokenizeAll(const std::string& model_dir, const std::vector<std::string>& corpus) {
  absl::StatusOr<std::unique_ptr<pkv::Tokenizer>> tokenizer =
      pkv::Tokenizer::FromModelDir(model_dir);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  std::unique_ptr<pkv::ChatPromptRenderer> renderer = pkv::ChatPromptRenderer::Load(model_dir);
  if (!renderer->has_template()) return Fail(model_dir + ": no usable chat template");
  int num_proto = 0;
  for (const std::string& line : corpus) {
    absl::StatusOr<std::vector<int32_t>> ids =
        TokenizeLine(*renderer, **tokenizer, line, &num_proto);
    std::string out;
    if (ids.ok()) {
      out = "[" + absl::StrJoin(*ids, ",") + "]";
    } else {
      out = "{\"error\": ";
      pkv::chat::AppendJsonString(std::string(ids.status().message()), &out);
      out += "}";
    }
    std::cout << out << "\n";
  }
  std::fprintf(stderr, "pkv-chat-render: %d of %zu conversations as pkv.v1.ChatPrompt\n", num_proto,
               corpus.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pkv::chat::RenderOptions options;
  std::string bos, eos, snippets, model_dir;
  bool have_bos = false, have_eos = false;
  int i = 1;
  for (; i + 1 < argc && std::strncmp(argv[i], "--", 2) == 0; i += 2) {
    std::string flag = argv[i];
    if (flag == "--now") {
      int64_t seconds;
      if (!absl::SimpleAtoi(argv[i + 1], &seconds)) return Fail("--now takes unix seconds");
      options.now = absl::FromUnixSeconds(seconds);
    } else if (flag == "--bos") {
      bos = argv[i + 1];
      have_bos = true;
    } else if (flag == "--snippets") {
      snippets = argv[i + 1];
    } else if (flag == "--tokenize") {
      model_dir = argv[i + 1];
    } else if (flag == "--eos") {
      eos = argv[i + 1];
      have_eos = true;
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  const bool one_path = !snippets.empty() || !model_dir.empty();
  if (argc - i != (one_path ? 1 : 2)) {
    return Fail(
        "usage: pkv-chat-render [--now S] [--bos T] [--eos T] TEMPLATE CORPUS.jsonl\n"
        "       pkv-chat-render [--now S] --snippets SNIPPETS.txt CORPUS.jsonl\n"
        "       pkv-chat-render --tokenize MODEL_DIR CORPUS.jsonl");
  }
  const std::string corpus_path = argv[argc - 1];
  if (!std::ifstream(corpus_path)) return Fail(corpus_path + ": cannot open");
  const std::vector<std::string> corpus = ReadLines(corpus_path, false);
  if (!model_dir.empty()) return TokenizeAll(model_dir, corpus);
  if (!snippets.empty()) {
    pkv::chat::ModelChatTemplate model;
    model.bos_token = bos;
    model.eos_token = eos;
    if (!std::ifstream(snippets)) return Fail(snippets + ": cannot open");
    for (const std::string& source : ReadLines(snippets, true)) {
      RenderAll(pkv::chat::ChatTemplate::Compile(source), model, corpus, options);
    }
    return 0;
  }
  auto model = LoadTemplate(argv[i]);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  if (!model->has_value()) return Fail(std::string(argv[i]) + ": no chat template");
  if (have_bos) (*model)->bos_token = bos;
  if (have_eos) (*model)->eos_token = eos;
  RenderAll(pkv::chat::ChatTemplate::Compile((*model)->source), **model, corpus, options);
  return 0;
}
