// The safe pickle reader refuses code and survives garbage: every opcode that imports or calls
// is refused by name and offset, malformed and truncated input is a TraceFormatError (never a
// crash), and hostile inputs cannot exhaust memory or the stack.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "memscope/pickle.hpp"
#include "pickle_samples.hpp"
#include "pickle_test_util.hpp"

namespace memscope {
namespace {

using testing::bytes;
using testing::cat;
using testing::le;
using testing::p2;
using testing::pickle_error;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PickleRefusal, ClassicOsSystemPayload) {
  const std::string message = pickle_error(samples::kOsSystemP0, "evil.pickle");
  EXPECT_TRUE(contains(message, "evil.pickle")) << message;
  EXPECT_TRUE(contains(message, "GLOBAL (0x63 'c') at byte 0")) << message;
  EXPECT_TRUE(contains(message, "refused")) << message;
}

TEST(PickleRefusal, StackGlobalReducePayloadOfProtocolFour) {
  const std::string message = pickle_error(samples::kOsSystemP4, "p4.pickle");
  EXPECT_TRUE(contains(
      message, "STACK_GLOBAL (0x93) at byte " + std::to_string(samples::kOsSystemP4StackGlobal)))
      << message;
  EXPECT_TRUE(contains(message, "imports or calls code")) << message;
  const std::string object = pickle_error(samples::kObjectP2);
  EXPECT_TRUE(
      contains(object, "GLOBAL (0x63 'c') at byte " + std::to_string(samples::kObjectP2Global)))
      << object;
}

TEST(PickleRefusal, EveryCodeOpcodeByName) {
  const std::pair<unsigned, const char*> code_opcodes[] = {
      {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},     {'b', "BUILD"}, {'i', "INST"},
      {'o', "OBJ"},    {0x81, "NEWOBJ"},       {0x92, "NEWOBJ_EX"}, {0x82, "EXT1"}, {0x83, "EXT2"},
      {0x84, "EXT4"},  {'P', "PERSID"},        {'Q', "BINPERSID"}};
  for (const auto& [code, name] : code_opcodes) {
    // A valid prefix (PROTO 4, NONE, MARK, NONE) so the refusal is not at the first byte, and
    // plausible arguments after it that must never be read.
    const std::string data =
        bytes({0x80, 4, 'N', '(', 'N', code}) + cat("os\nsystem\n", bytes({0x85, 'R', '.'}));
    const std::string message = pickle_error(data, "code.pickle");
    EXPECT_TRUE(contains(message, std::string(name) + " (")) << message;
    EXPECT_TRUE(contains(message, "at byte 5")) << message;
    EXPECT_TRUE(contains(message, "code.pickle")) << message;
    EXPECT_TRUE(contains(message, "refused")) << message;
  }
}

TEST(PickleRefusal, UnsupportedAndUnknownOpcodes) {
  EXPECT_TRUE(contains(pickle_error(samples::kSetP4), "sets are not supported"));
  EXPECT_TRUE(contains(pickle_error(p2(bytes({0x97}))), "NEXT_BUFFER"));
  EXPECT_TRUE(contains(pickle_error(p2(bytes({0xff}))), "unknown opcode 0xff at byte 2"));
  EXPECT_TRUE(contains(pickle_error(bytes({0x80, 6, 'N', '.'})), "protocol 6 is newer than 5"));
  EXPECT_TRUE(contains(pickle_error(""), "empty input"));
  EXPECT_TRUE(contains(pickle_error(bytes({0x80, 2, 'N'})), "before the STOP opcode"));
}

TEST(PickleRefusal, MalformedArgumentsAndStackMisuse) {
  const std::pair<std::string, const char*> cases[] = {
      {p2("a"), "stack underflow"},
      {p2("](N"
          "a"),
       "stack underflow"},  // APPEND may not reach below a MARK
      {p2(")N"
          "a"),
       "cannot append to a tuple"},
      {p2("]((e"), "stack underflow"},  // APPENDS and SETITEMS fill what is below their MARK,
      {p2("}((u"), "stack underflow"},  // which must itself be above the next MARK
      {p2("(e"), "stack underflow"},
      {p2("}(Nu"), "odd number of items"},
      {p2("h\x05"), "memo key 5 was never stored"},
      {p2("e"), "no MARK"},
      {p2(cat("T", le(0xFFFFFFFF, 4))), "negative length"},
      {p2(bytes({0x8d}) + le(std::uint64_t{1} << 62, 8)), "only 1 remain"},
      {p2(bytes({0x95}) + le(1000, 8)), "frame of 1000 bytes"},
      {p2(cat("X", le(2, 4)) + "\xc3("), "not valid UTF-8"},
      {"S'unterminated\n.", "must be quoted"},
      {"Iabc\n.", "not a decimal integer"},
      {"Fx\n.", "not a float"},
      {"I1", "no terminating newline"},
  };
  for (const auto& [data, expected] : cases) {
    const std::string message = pickle_error(data);
    EXPECT_TRUE(contains(message, expected)) << "got: " << message << "\nexpected: " << expected;
  }
  EXPECT_TRUE(contains(pickle_error(bytes({0x80, 2, '.'})), "STOP (0x2e '.') at byte 2"));
}

TEST(PickleRefusal, EveryPrefixOfAValidPickleIsAnError) {
  const std::string_view valid[] = {samples::kPlainP0, samples::kPlainP1, samples::kPlainP2,
                                    samples::kPlainP4, samples::kPlainP5, samples::kBytesP3,
                                    samples::kBytesP5, samples::kSharedP4};
  for (const std::string_view data : valid) {
    ASSERT_NO_THROW((void)read_pickle(data));
    for (std::size_t n = 0; n < data.size(); ++n) {
      try {
        (void)read_pickle(data.substr(0, n));
        ADD_FAILURE() << "a prefix of " << n << " of " << data.size() << " bytes was accepted";
      } catch (const TraceFormatError&) {
      }
    }
  }
}

TEST(PickleRefusal, MutatedPicklesNeverCrash) {
  // A small deterministic fuzz in every build: overwrite, insert and delete bytes.
  std::mt19937 rng(20240611);
  const std::string_view seeds[] = {samples::kPlainP2, samples::kPlainP4, samples::kPlainP0,
                                    samples::kSharedP4, samples::kBytesP5};
  int accepted = 0;
  for (int round = 0; round < 6000; ++round) {
    std::string data(seeds[static_cast<std::size_t>(round) % std::size(seeds)]);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !data.empty(); ++e) {
      const std::size_t at = rng() % data.size();
      switch (rng() % 3) {
        case 0:
          data[at] = static_cast<char>(rng() & 0xFF);
          break;
        case 1:
          data.insert(at, 1, static_cast<char>(rng() & 0xFF));
          break;
        default:
          data.erase(at, 1);
      }
    }
    try {
      (void)read_pickle(data);
      ++accepted;
    } catch (const TraceFormatError&) {
    }
  }
  EXPECT_GT(accepted, 0);  // some edits only change values: the reader is not merely refusing
}

// Ten references to the previous list at each of `levels` levels: 10**levels items as a tree.
std::string nested_sharing(unsigned levels) {
  std::string body = cat("]", bytes({0x94}));
  for (unsigned level = 0; level < levels; ++level) {
    body += "(";
    for (int i = 0; i < 10; ++i) body += cat("j", le(level, 4));
    body += cat("l", bytes({0x94}));
  }
  return p2(body);
}

TEST(PickleRefusal, SharedObjectsStaySharedButTreeWalksAreBounded) {
  // Six levels: a million items as a tree, 61 lists in memory. Read at once, and shared.
  const PickleValue six = read_pickle(nested_sharing(6));
  const auto* top = six.get_if<PickleList>();
  ASSERT_NE(top, nullptr);
  ASSERT_EQ(top->size(), 10U);
  EXPECT_EQ((*top)[0], (*top)[9]);
  // "Billion laughs": 30 levels would be 10**30 items for anything that walks the value.
  const auto start = std::chrono::steady_clock::now();
  const std::string message = pickle_error(nested_sharing(30));
  EXPECT_TRUE(contains(message, "walked as a tree")) << message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  PickleLimits few;
  few.max_tree_items = 1000;
  EXPECT_TRUE(contains(pickle_error(nested_sharing(3), "<memory>", few), "walked as a tree"));
}

TEST(PickleRefusal, MemoryIsBounded) {
  // One 100 KB string in a list 10,000 times: strings are copied, 1 GB. The budget stops it.
  std::string body = cat("X", le(100000, 4), std::string(100000, 's'), bytes({0x94}), "(");
  for (int i = 0; i < 10000; ++i) body += cat("h", bytes({0}));
  body += "l";
  const std::string message = pickle_error(p2(body));
  EXPECT_TRUE(contains(message, "memory budget")) << message;
  // A tight explicit limit applies to ordinary input too.
  PickleLimits tight;
  tight.max_bytes = 1000;
  EXPECT_TRUE(contains(pickle_error(samples::kPlainP4, "<memory>", tight), "memory budget"));
}

TEST(PickleRefusal, DeepNestingAndRecursionAreRefused) {
  constexpr int kDepth = 100000;
  const std::string lists = std::string(kDepth, ']') + std::string(kDepth - 1, 'a');
  EXPECT_TRUE(contains(pickle_error(p2(lists)), "deeper than 200 levels"));
  const std::string tuples = ")" + std::string(kDepth, '\x85');
  EXPECT_TRUE(contains(pickle_error(p2(tuples)), "deeper than 200 levels"));
  // The same tuple as a dict key is refused while its key is computed, not by a stack overflow.
  EXPECT_TRUE(contains(pickle_error(p2("}" + tuples + "Ns")), "nests deeper than"));
  PickleLimits shallow;
  shallow.max_depth = 2;
  EXPECT_TRUE(contains(pickle_error(samples::kPlainP4, "<memory>", shallow), "deeper than 2"));
  EXPECT_TRUE(contains(pickle_error(samples::kRecursiveP2), "recursive"));
}

}  // namespace
}  // namespace memscope
