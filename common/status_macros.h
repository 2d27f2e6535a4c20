// Status propagation helpers. Debian's abseil (20220623) has no ABSL_RETURN_IF_ERROR and no
// absl/log, so PersistentKV defines thin equivalents here. Fallible functions across files return
// absl::Status / absl::StatusOr<T>; PKV_CHECK is for broken invariants only (a refcount underflow),
// never for validating a request.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PKV_INTERNAL_CONCAT_(a, b) a##b
#define PKV_INTERNAL_CONCAT(a, b) PKV_INTERNAL_CONCAT_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define PKV_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::absl::Status pkv_status_ = (expr);       \
    if (!pkv_status_.ok()) return pkv_status_; \
  } while (0)

// PKV_ASSIGN_OR_RETURN(auto x, MakeX()); assigns the value or returns the error.
#define PKV_ASSIGN_OR_RETURN(lhs, expr) \
  PKV_INTERNAL_ASSIGN_OR_RETURN(PKV_INTERNAL_CONCAT(pkv_statusor_, __LINE__), lhs, expr)
#define PKV_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

namespace pkv::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* cond,
                                     const char* msg) {
  std::fprintf(stderr, "PKV_CHECK failed at %s:%d: %s %s\n", file, line, cond, msg ? msg : "");
  std::fflush(stderr);
  std::abort();
}
}  // namespace pkv::internal

// Aborts the process when an invariant is broken. Not for input validation.
#define PKV_CHECK(cond)                                                            \
  do {                                                                             \
    if (!(cond)) ::pkv::internal::CheckFailed(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)
#define PKV_CHECK_MSG(cond, msg)                                               \
  do {                                                                         \
    if (!(cond)) ::pkv::internal::CheckFailed(__FILE__, __LINE__, #cond, msg); \
  } while (0)
