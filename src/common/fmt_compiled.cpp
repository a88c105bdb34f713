// fmt's formatting engine, compiled once, into the library.
//
// With FMT_HEADER_ONLY every translation unit that formats anything compiles fmt's whole engine
// (vformat_to's parser and writers, the float formatter) at -O3: src/common/units.cpp took 4.4 s
// of CPU with it and 0.9 s without (GCC 12, 2026-12-07), and about a hundred of the library's,
// the command's and the extension's units format. So the other units see fmt's declarations
// only (fmt's own non-header-only mode: FMT_HEADER_ONLY unset) and this one defines them:
// format-inl.h's functions (FMT_FUNC, empty in that mode), plus the templates that fmt 9's
// headers declare but leave to its compiled library, instantiated below. The library carries
// them, so a program that links memscope still needs no fmt of its own.
//
// The instantiations are fmt 9's interface; cmake/FmtMode.cmake picks this mode only for fmt 9
// (Debian 12's 9.1.0 and the pinned fallback's 9.1.0), and header-only for any other version.
#include <fmt/format.h>
// format.h must come first: format-inl.h relies on its declarations.
#include <fmt/format-inl.h>

#if FMT_VERSION / 10000 != 9
#error "fmt_compiled.cpp instantiates fmt 9's templates: configure with fmt 9 or header-only fmt"
#endif
#ifdef FMT_HEADER_ONLY
#error "fmt_compiled.cpp is built only when fmt is not header-only (cmake/FmtMode.cmake)"
#endif

FMT_BEGIN_NAMESPACE
namespace detail {

// Floats: format.h declares to_decimal (FMT_API) and the units that write floats call it.
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

// Locales: core.h declares these members of locale_ref; format.h declares the helpers extern.
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

// core.h declares vformat_to and buffer::append without defining them: units that include only
// core.h (fmt::format_to into a buffer) link against these.
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view,
                                 basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);

}  // namespace detail
FMT_END_NAMESPACE
