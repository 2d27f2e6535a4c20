// pkv-tokenize: encodes a corpus with a tokenizer.json and prints the token ids of each sample.
//   pkv-tokenize [--add-special-tokens] [--config TOKENIZER_CONFIG_JSON] [--stats | --time]
//                [--repeat N] [--decode-out FILE] TOKENIZER_JSON CORPUS
//   pkv-tokenize --make-tiny VOCAB_SIZE OUT_JSON   (writes BuildTinyTokenizerJson(VOCAB_SIZE))
// CORPUS holds one sample per line, each a JSON string literal ("..." with JSON escapes), so
// samples may contain newlines and any Unicode. Output: one line per sample, ids separated by
// spaces. --config applies a tokenizer_config.json (add_bos_token, add_eos_token, legacy).
// --decode-out writes, per sample, Decode(ids) (lossy UTF-8, special tokens kept) as a JSON string
// literal. --stats prints load and encode times to stderr for people; --time prints one JSON line
// {"load_s", "encode_s", "tokens", "bytes", "repeat"} to stderr for scripts, where encode_s is the
// fastest of --repeat N passes over the corpus (default 1). Everything runs on one thread. Used by
// the tokenizer agreement test and tests/tokenizer/hf_python_agree.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/utf8.h"
#include "worker/tokenizer/tiny_tokenizer.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

struct Options {
  bool add_special = false;
  bool stats = false;
  bool time = false;
  int repeat = 1;
  std::string config;
  std::string decode_out;
  std::vector<std::string> paths;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Usage() {
  std::fprintf(stderr,
               "usage: pkv-tokenize [--add-special-tokens] [--config TOKENIZER_CONFIG_JSON]\n"
               "                    [--stats | --time] [--repeat N] [--decode-out FILE]\n"
               "                    TOKENIZER_JSON CORPUS\n"
               "       pkv-tokenize --make-tiny VOCAB_SIZE OUT_JSON\n");
  return 2;
}

int MakeTiny(const std::string& vocab_size, const std::string& path) {
  auto json = pkv::BuildTinyTokenizerJson(std::atoi(vocab_size.c_str()));
  if (!json.ok()) {
    std::fprintf(stderr, "pkv-tokenize: %s\n", json.status().ToString().c_str());
    return 1;
  }
  std::ofstream out(path, std::ios::binary);
  out << *json;
  if (!out.flush()) {
    std::fprintf(stderr, "pkv-tokenize: cannot write '%s'\n", path.c_str());
    return 1;
  }
  return 0;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--add-special-tokens") {
      o->add_special = true;
    } else if (arg == "--stats") {
      o->stats = true;
    } else if (arg == "--time") {
      o->time = true;
    } else if (arg == "--config" && has_value) {
      o->config = argv[++i];
    } else if (arg == "--decode-out" && has_value) {
      o->decode_out = argv[++i];
    } else if (arg == "--repeat" && has_value) {
      o->repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!arg.empty() && arg[0] == '-') {
      return false;
    } else {
      o->paths.push_back(arg);
    }
  }
  return o->paths.size() == 2;
}

// A JSON string literal of well-formed UTF-8 `s`.
std::string JsonQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

std::string IdsLine(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.push_back(' ');
    out += std::to_string(ids[i]);
  }
  return out + "\n";
}

bool ReadCorpus(const std::string& path, std::vector<std::string>* samples) {
  std::ifstream corpus(path);
  if (!corpus) {
    std::fprintf(stderr, "pkv-tokenize: cannot open corpus '%s'\n", path.c_str());
    return false;
  }
  std::string line;
  for (int line_no = 1; std::getline(corpus, line); ++line_no) {
    auto sample = pkv::ParseJson(line);
    if (!sample.ok() || !sample->is_string()) {
      std::fprintf(stderr, "pkv-tokenize: %s:%d: not a JSON string\n", path.c_str(), line_no);
      return false;
    }
    samples->push_back(sample->str());
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--make-tiny") return MakeTiny(argv[2], argv[3]);
  Options o;
  if (!ParseArgs(argc, argv, &o)) return Usage();

  auto start = std::chrono::steady_clock::now();
  auto tokenizer = pkv::Tokenizer::FromFile(o.paths[0], o.config);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "pkv-tokenize: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  const double load_s = SecondsSince(start);
  if (o.stats)
    std::fprintf(stderr, "load: %.3f s, vocab_size %d\n", load_s, (*tokenizer)->vocab_size());

  std::vector<std::string> samples;
  if (!ReadCorpus(o.paths[1], &samples)) return 1;
  std::vector<std::vector<int32_t>> all_ids(samples.size());
  double best_s = 0;
  size_t num_tokens = 0;
  size_t num_bytes = 0;
  for (int pass = 0; pass < o.repeat; ++pass) {
    start = std::chrono::steady_clock::now();
    num_tokens = num_bytes = 0;
    for (size_t i = 0; i < samples.size(); ++i) {
      auto ids = (*tokenizer)->Encode(samples[i], o.add_special);
      if (!ids.ok()) {
        std::fprintf(stderr, "pkv-tokenize: %s:%zu: %s\n", o.paths[1].c_str(), i + 1,
                     ids.status().ToString().c_str());
        return 1;
      }
      num_tokens += ids->size();
      num_bytes += samples[i].size();
      all_ids[i] = *std::move(ids);
    }
    const double s = SecondsSince(start);
    best_s = pass == 0 ? s : std::min(best_s, s);
  }
  for (const auto& ids : all_ids) {
    const std::string line = IdsLine(ids);
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  if (!o.decode_out.empty()) {
    std::ofstream out(o.decode_out, std::ios::binary);
    for (const auto& ids : all_ids) {
      auto bytes = (*tokenizer)->Decode(ids);
      std::string text;
      pkv::utf8::DecodeLossy(bytes.ok() ? *bytes : "", /*final=*/true, &text);
      out << JsonQuote(text) << "\n";
    }
    if (!out.flush()) {
      std::fprintf(stderr, "pkv-tokenize: cannot write '%s'\n", o.decode_out.c_str());
      return 1;
    }
  }
  if (o.stats) std::fprintf(stderr, "encode: %.3f s, %zu tokens\n", best_s, num_tokens);
  if (o.time) {
    std::fprintf(stderr,
                 "{\"load_s\": %.6f, \"encode_s\": %.6f, \"tokens\": %zu, \"bytes\": %zu, "
                 "\"repeat\": %d}\n",
                 load_s, best_s, num_tokens, num_bytes, o.repeat);
  }
  return 0;
}
