// Stub: being written (html_report.hpp).
#include "html_report.hpp"

namespace memscope::cli {

std::string render_html(const Report& report, const HtmlOptions& /*options*/) {
  return "<!doctype html><title>" + report.title + "</title>";
}
void write_html(const Report& /*report*/, const std::filesystem::path& /*path*/,
                const HtmlOptions& /*options*/) {}

}  // namespace memscope::cli
