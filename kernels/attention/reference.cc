#include "kernels/attention/reference.h"

#include "kernels/attention/reference_internal.h"
#include "kernels/common/float16.h"

namespace pkv {
namespace {

// Reads the cache's own element type.
template <typename T>
struct NativeKv {
  const PagedKvView<const T>& view;
  const KvShape& shape() const { return view.shape; }
  int64_t Offset(int64_t page, int32_t head, int32_t slot) const {
    return view.Offset(page, head, slot);
  }
  float K(int64_t i) const { return ToFloat(view.k[i]); }
  float V(int64_t i) const { return ToFloat(view.v[i]); }
};

}  // namespace

template <typename T>
void ReferenceDecodeAttention(const T* q, const PagedKvView<const T>& kv,
                              const BlockTableView& table, float scale, float* out, float* lse) {
  internal::DecodeLoops(q, NativeKv<T>{kv}, table, scale, out, lse);
}

template <typename T>
void ReferencePrefillAttention(const T* q, const int32_t* qo_indptr, const PagedKvView<const T>& kv,
                               const BlockTableView& table, float scale, float* out) {
  internal::PrefillLoops(q, qo_indptr, NativeKv<T>{kv}, table, scale, out);
}

#define PKV_INSTANTIATE_REFERENCE(T)                                                             \
  template void ReferenceDecodeAttention<T>(const T*, const PagedKvView<const T>&,               \
                                            const BlockTableView&, float, float*, float*);       \
  template void ReferencePrefillAttention<T>(const T*, const int32_t*,                           \
                                             const PagedKvView<const T>&, const BlockTableView&, \
                                             float, float*);
PKV_INSTANTIATE_REFERENCE(float)
PKV_INSTANTIATE_REFERENCE(Half)
PKV_INSTANTIATE_REFERENCE(BFloat16)

}  // namespace pkv
