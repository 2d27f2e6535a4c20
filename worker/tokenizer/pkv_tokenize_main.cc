// pkv-tokenize: encodes a corpus with a tokenizer.json and prints the token ids of each sample.
//   pkv-tokenize [--add-special-tokens] [--stats] TOKENIZER_JSON CORPUS
//   pkv-tokenize --make-tiny VOCAB_SIZE OUT_JSON   (writes BuildTinyTokenizerJson(VOCAB_SIZE))
// CORPUS holds one sample per line, each a JSON string literal ("..." with JSON escapes), so
// samples may contain newlines and any Unicode. Output: one line per sample, ids separated by
// spaces. --stats prints load and encode times to stderr. Used by the tokenizer agreement test.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/json.h"
#include "worker/tokenizer/tiny_tokenizer.h"
#include "worker/tokenizer/tokenizer.h"

namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Usage() {
  std::fprintf(stderr,
               "usage: pkv-tokenize [--add-special-tokens] [--stats] TOKENIZER_JSON CORPUS\n"
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

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--make-tiny") return MakeTiny(argv[2], argv[3]);
  bool add_special = false;
  bool stats = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--add-special-tokens") {
      add_special = true;
    } else if (arg == "--stats") {
      stats = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return Usage();
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.size() != 2) return Usage();

  auto start = std::chrono::steady_clock::now();
  auto tokenizer = pkv::Tokenizer::FromFile(paths[0]);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "pkv-tokenize: %s\n", tokenizer.status().ToString().c_str());
    return 1;
  }
  if (stats)
    std::fprintf(stderr, "load: %.3f s, vocab_size %d\n", SecondsSince(start),
                 (*tokenizer)->vocab_size());

  std::ifstream corpus(paths[1]);
  if (!corpus) {
    std::fprintf(stderr, "pkv-tokenize: cannot open corpus '%s'\n", paths[1].c_str());
    return 1;
  }
  start = std::chrono::steady_clock::now();
  size_t num_tokens = 0;
  std::string line;
  for (int line_no = 1; std::getline(corpus, line); ++line_no) {
    auto sample = pkv::ParseJson(line);
    if (!sample.ok() || !sample->is_string()) {
      std::fprintf(stderr, "pkv-tokenize: %s:%d: not a JSON string\n", paths[1].c_str(), line_no);
      return 1;
    }
    auto ids = (*tokenizer)->Encode(sample->str(), add_special);
    if (!ids.ok()) {
      std::fprintf(stderr, "pkv-tokenize: %s:%d: %s\n", paths[1].c_str(), line_no,
                   ids.status().ToString().c_str());
      return 1;
    }
    num_tokens += ids->size();
    std::string out;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string((*ids)[i]);
    }
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  if (stats) std::fprintf(stderr, "encode: %.3f s, %zu tokens\n", SecondsSince(start), num_tokens);
  return 0;
}
