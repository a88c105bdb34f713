// Compile-time ABI checks of our hand-written declarations of a C library (the CUDA driver,
// NVML) against the library's real header.
//
// real_t<T> is T with every one of our types replaced by the real header's type, through
// pointers, const and function-pointer types, so that a function-pointer type we declare can
// be compared with the real one by std::is_same. Each check maps its own types with
// MEMSCOPE_ABI_MAP(ours, theirs) at namespace scope of memscope::testing::abi.
#pragma once

namespace memscope::testing::abi {

template <typename T>
struct Real {
  using type = T;
};
template <typename T>
using real_t = typename Real<T>::type;
template <typename T>
struct Real<T*> {
  using type = real_t<T>*;
};
template <typename T>
struct Real<const T> {
  using type = const real_t<T>;
};
template <typename R, typename... A>
struct Real<R (*)(A...)> {
  using type = real_t<R> (*)(real_t<A>...);
};

}  // namespace memscope::testing::abi

#define MEMSCOPE_ABI_MAP(ours, theirs) \
  namespace memscope::testing::abi {   \
  template <>                          \
  struct Real<ours> {                  \
    using type = theirs;               \
  };                                   \
  }
