// A compiled Jinja chat template, rendered as Hugging Face transformers renders chat templates:
// jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
// raise_exception, strftime_now and a tojson filter that keeps non-ASCII text.
//
// Supported: text, {{ }}, {% %}, {# #} with whitespace control; if/elif/else; for (loop.index,
// index0, revindex, revindex0, first, last, length, previtem, nextitem, cycle; else branch;
// inline `if` filter; tuple targets); break/continue; set (names, tuples, ns.attr, block set);
// filter blocks; macros with defaults; literals; Python operators and truthiness; is-tests; the
// filters in filters.h; the str/dict methods in methods.h; range, dict, namespace, raise_exception,
// strftime_now. Unsupported syntax (extends, include, import, call blocks, recursive loops, ...)
// is a compile error naming its line and column.
//
// Undefined follows jinja2's default Undefined: prints empty, is falsy, iterates as empty; an
// attribute of it, arithmetic on it, or calling it is an error.
//
// Thread-safety: Compile once; Render is const and may run concurrently from many threads.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/json.h"

namespace pkv::chat {

struct Stmt;

struct RenderOptions {
  absl::Time now = absl::Now();  // what strftime_now sees, in the local time zone (TZ)
};

class ChatTemplate {
 public:
  // INVALID_ARGUMENT "chat template: line L col C: ..." on syntax errors or unsupported features.
  static absl::StatusOr<ChatTemplate> Compile(std::string_view source);

  // `context`: JSON object of top-level variables (messages, add_generation_prompt, bos_token,
  // eos_token, tools, ...). raise_exception(msg) -> INVALID_ARGUMENT carrying msg verbatim; other
  // runtime errors -> INVALID_ARGUMENT "chat template: line L: ...". Work is bounded: output over
  // 64 MiB, more than 10^7 steps (statements and loop iterations), more than 10 s of rendering,
  // macro recursion deeper than 100, values nested deeper than 256 or ranges over 100000 items ->
  // RESOURCE_EXHAUSTED.
  absl::StatusOr<std::string> Render(const pkv::JsonValue& context,
                                     const RenderOptions& options = {}) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> program)
      : program_(std::move(program)) {}

  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> program_;  // immutable, shared
};

}  // namespace pkv::chat
