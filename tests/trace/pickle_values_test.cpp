// The safe pickle reader builds exactly the value Python pickled: every protocol, every
// plain-data opcode family, shared objects, Python's dict-key rules and int64 bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
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
using testing::num;
using testing::p2;
using testing::str;

PickleValue list_of(std::vector<PickleValue> items) {
  return PickleList{std::move(items)};
}
PickleValue tuple_of(std::vector<PickleValue> items) {
  return PickleTuple{std::move(items)};
}

// PLAIN in make_pickle_samples.py.
PickleValue plain_expected() {
  std::vector<PickleValue> many;
  for (std::int64_t i = 0; i <= 1000; ++i) many.push_back(num(i));
  const PickleValue deeper{PickleDict({{str("deeper"), list_of({PickleValue{0.5}})}})};
  const PickleValue nested{PickleDict({{str("k"), deeper}})};
  std::vector<PickleDict::Item> d;
  const auto add = [&d](const char* key, PickleValue v) { d.emplace_back(str(key), std::move(v)); };
  add("none", PickleValue{});
  add("true", PickleValue{true});
  add("false", PickleValue{false});
  add("small", num(7));
  add("neg", num(-300));
  add("int32", num(2147483647));
  add("big", num(std::int64_t{1} << 62));
  add("min", num(std::numeric_limits<std::int64_t>::min()));
  add("float", PickleValue{2.5});
  add("inf", PickleValue{std::numeric_limits<double>::infinity()});
  add("str", str("h\xc3\xa9llo \xe2\x9c\x93 \\ \n"));
  add("empty", str(""));
  add("tuple", tuple_of({num(1), str("a"), tuple_of({num(2)})}));
  add("pair", tuple_of({PickleValue{}, PickleValue{false}}));
  add("triple", tuple_of({num(1), num(2), num(3)}));
  add("unit", tuple_of({}));
  add("list", list_of({num(1), list_of({num(2), num(3)}), PickleValue{PickleDict{}}}));
  add("many", list_of(std::move(many)));
  add("nested", nested);
  return PickleValue{PickleDict(std::move(d))};
}

TEST(PickleValues, EveryProtocolReadsThePlainValue) {
  const PickleValue expected = plain_expected();
  const std::string_view samples[] = {samples::kPlainP0, samples::kPlainP1, samples::kPlainP2,
                                      samples::kPlainP3, samples::kPlainP4, samples::kPlainP5};
  for (std::size_t proto = 0; proto < std::size(samples); ++proto) {
    SCOPED_TRACE("protocol " + std::to_string(proto));
    EXPECT_EQ(read_pickle(samples[proto]), expected);
  }
}

TEST(PickleValues, BytesAndBytearrayBecomeBytes) {
  const PickleValue p3 = read_pickle(samples::kBytesP3);
  ASSERT_NE(p3.find("b"), nullptr);
  EXPECT_EQ(*p3.find("b"), PickleValue{PickleBytes{std::string("\x00\xff"
                                                               "ab",
                                                               4)}});
  EXPECT_EQ(*p3.find("long"), PickleValue{PickleBytes{std::string(300, 'x')}});
  const PickleValue p5 = read_pickle(samples::kBytesP5);
  EXPECT_EQ(*p5.find("ba"), PickleValue{PickleBytes{"xy"}});
  EXPECT_EQ(p5.find("ba")->type_name(), "bytes");
  // BINBYTES8 is only written for payloads over 4 GiB: hand-written.
  EXPECT_EQ(read_pickle(p2(bytes({0x8e}) + le(2, 8) + "hi")), PickleValue{PickleBytes{"hi"}});
}

TEST(PickleValues, TextArgumentsOfProtocolZero) {
  // STRING: a quoted Python 2 literal with escapes, read as Latin-1.
  EXPECT_EQ(read_pickle("S'a\\x41\\n\\'q\\101\\\\'\n."), str("aA\n'qA\\"));
  EXPECT_EQ(read_pickle("S\"\xe9\"\n."), str("\xc3\xa9"));
  // UNICODE: raw-unicode-escape; an even run of backslashes does not start an escape.
  EXPECT_EQ(read_pickle("V\\u00e9\\U0001F600\\\\u0041\n."),
            str("\xc3\xa9\xf0\x9f\x98\x80\\\\u0041"));
  EXPECT_EQ(read_pickle("I01\n."), PickleValue{true});
  EXPECT_EQ(read_pickle("I00\n."), PickleValue{false});
  EXPECT_EQ(read_pickle("I-12\n."), num(-12));
  EXPECT_EQ(read_pickle("L123L\n."), num(123));
  EXPECT_EQ(read_pickle("F-1e+300\n."), PickleValue{-1e300});
  const PickleValue nan = read_pickle("Fnan\n.");
  ASSERT_NE(nan.get_if<double>(), nullptr);
  EXPECT_TRUE(std::isnan(*nan.get_if<double>()));
  // Lists, dicts and tuples from marks; PUT/GET by decimal index; POP, DUP, POP_MARK.
  const PickleValue one_two = list_of({num(1), num(2)});
  EXPECT_EQ(read_pickle("(I1\nI2\nlp0\n(g0\ng0\nl."), list_of({one_two, one_two}));
  EXPECT_TRUE(testing::pickle_error("(lp0\nI1\nag0\na.").find("recursive") != std::string::npos);
  EXPECT_EQ(read_pickle("(I1\nI2\nd."), (PickleValue{PickleDict{{{num(1), num(2)}}}}));
  EXPECT_EQ(read_pickle("(I1\nI2\nt."), tuple_of({num(1), num(2)}));
  EXPECT_EQ(read_pickle("I1\nI2\n0."), num(1));
  EXPECT_EQ(read_pickle("(I7\n2t."), tuple_of({num(7), num(7)}));
  EXPECT_EQ(read_pickle("I5\n(I1\nI2\n1."), num(5));
  EXPECT_EQ(read_pickle("(0I3\n."), num(3));  // POP with nothing above the mark drops the mark
}

TEST(PickleValues, BinaryStringsAndIntegers) {
  EXPECT_EQ(read_pickle(p2(cat("T", le(3, 4)) + "a\xffz")),
            str("a\xc3\xbfz"));  // BINSTRING: Latin-1
  EXPECT_EQ(read_pickle(p2(cat("U", le(1, 1)) + "q")), str("q"));
  EXPECT_EQ(read_pickle(p2(bytes({0x8d}) + le(2, 8) + "ok")), str("ok"));  // BINUNICODE8
  EXPECT_EQ(read_pickle(p2(cat("X", le(3, 4)) + "\xed\xa0\x80")),
            str("\xed\xa0\x80"));  // surrogatepass
  EXPECT_EQ(read_pickle(p2(cat("J", le(0xFFFFFFFE, 4)))), num(-2));
  EXPECT_EQ(read_pickle(p2(cat("M", le(0xFFFF, 2)))), num(65535));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 0}))), num(0));  // LONG1 of no bytes
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 1, 0x80}))), num(-128));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 8}) + le(0x8000000000000000, 8))),
            num(std::numeric_limits<std::int64_t>::min()));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 8}) + le(0x7FFFFFFFFFFFFFFF, 8))),
            num(std::numeric_limits<std::int64_t>::max()));
  // Extra bytes that only repeat the sign are fine.
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 10}) + std::string(10, '\xff'))), num(-1));
  EXPECT_EQ(read_pickle(p2(bytes({0x8b}) + le(100, 4) + std::string(100, '\0'))), num(0));
  EXPECT_EQ(read_pickle(p2(cat("G", bytes({0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18})))),
            PickleValue{3.141592653589793});
}

// Decimal text of a little-endian two's complement integer, computed digit by digit (the long way,
// independent of the reader's division by 10^9).
std::string decimal_the_long_way(const std::string& le_bytes) {
  const bool negative = !le_bytes.empty() && (static_cast<std::uint8_t>(le_bytes.back()) & 0x80);
  std::vector<int> digits{0};  // least significant first
  const auto times_add = [&](int mul, int add) {
    int carry = add;
    for (int& d : digits) {
      const int v = d * mul + carry;
      d = v % 10;
      carry = v / 10;
    }
    for (; carry > 0; carry /= 10) digits.push_back(carry % 10);
  };
  // The magnitude: for a negative value, ~bytes + 1.
  std::string magnitude = le_bytes;
  if (negative) {
    int carry = 1;
    for (char& c : magnitude) {
      const int v = (~static_cast<std::uint8_t>(c) & 0xFF) + carry;
      c = static_cast<char>(v & 0xFF);
      carry = v >> 8;
    }
  }
  for (std::size_t i = magnitude.size(); i-- > 0;) {
    times_add(256, static_cast<std::uint8_t>(magnitude[i]));
  }
  while (digits.size() > 1 && digits.back() == 0) digits.pop_back();
  std::string out = negative ? "-" : "";
  for (std::size_t i = digits.size(); i-- > 0;) out.push_back(static_cast<char>('0' + digits[i]));
  return out;
}

PickleValue big(std::string decimal) {
  return PickleValue{PickleBigInt{std::move(decimal)}};
}

TEST(PickleValues, IntegersBeyondInt64AreKeptAsPythonPrintsThem) {
  // 2**63: nine bytes, the ninth zero, so positive.
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 9}) + le(0x8000000000000000, 8) + bytes({0}))),
            big("9223372036854775808"));
  // 2**64 - 1, as Python 3.13's PyTorch writes an unknown frame line.
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 9}) + std::string(8, '\xff') + bytes({0}))),
            big("18446744073709551615"));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 9}) + std::string(8, '\0') + bytes({1}))),
            big("18446744073709551616"));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 9}) + le(0x7FFFFFFFFFFFFFFF, 8) + bytes({0xff}))),
            big("-9223372036854775809"));
  EXPECT_EQ(read_pickle("I99999999999999999999\n."), big("99999999999999999999"));
  EXPECT_EQ(read_pickle("L-00099999999999999999999L\n."), big("-99999999999999999999"));
  EXPECT_EQ(read_pickle(p2(bytes({0x8a, 9}) + std::string(8, '\xff') + bytes({0}))).type_name(),
            "int");
  // Python prints no int of more than 4300 digits; neither is one kept.
  const std::string huge = p2(bytes({0x8b}) + le(2000, 4) + std::string(1999, '\x01') + bytes({1}));
  EXPECT_NE(testing::pickle_error(huge).find("more than 4300 decimal digits"), std::string::npos)
      << testing::pickle_error(huge);
  EXPECT_NE(testing::pickle_error("I12x\n.").find("not a decimal integer"), std::string::npos);
}

TEST(PickleValues, LongPayloadsOfAnyLengthGivePythonsDecimal) {
  std::mt19937_64 rng(25);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::size_t n = 9 + rng() % 120;
    std::string payload(n, '\0');
    for (char& c : payload) c = static_cast<char>(rng() & 0xFF);
    if (trial % 3 == 0) payload.back() = static_cast<char>(payload.back() | 0x80);  // negatives
    const PickleValue v = read_pickle(p2(bytes({0x8b}) + le(n, 4) + payload));
    const std::string want = decimal_the_long_way(payload);
    if (const auto* i = v.get_if<std::int64_t>()) {
      EXPECT_EQ(std::to_string(*i), want) << "trial " << trial;  // only sign-extended ones
    } else {
      ASSERT_NE(v.get_if<PickleBigInt>(), nullptr) << "trial " << trial;
      EXPECT_EQ(v.get_if<PickleBigInt>()->decimal, want) << "trial " << trial;
    }
  }
}

TEST(PickleValues, SharedObjectsAreCopiedAsFilled) {
  // The pickler memoizes a list before filling it; every later reference must see it full.
  const PickleValue shared = list_of({num(1), num(2)});
  const PickleValue d = read_pickle(samples::kSharedP2);
  EXPECT_EQ(*d.find("x"), shared);
  EXPECT_EQ(*d.find("y"), shared);
  EXPECT_EQ(read_pickle(samples::kSharedP4), list_of({shared, shared, shared}));
}

TEST(PickleValues, DictKeysFollowPython) {
  // {1: 'a', True: 'b', 1.0: 'c'} is one key in Python: the first key, the last value.
  const std::string text =
      p2(cat("}(K\x01X", le(1, 4)) + cat("a", bytes({0x88})) + cat("X", le(1, 4)) + "b" +
         cat("G", bytes({0x3f, 0xf0, 0, 0, 0, 0, 0, 0})) + cat("X", le(1, 4)) + "cu");
  const PickleValue v = read_pickle(text);
  EXPECT_EQ(v, (PickleValue{PickleDict{{{num(1), str("c")}}}}));
  // str and bytes keys differ; tuple keys compare by value.
  const PickleValue w = read_pickle(p2(cat("}(X", le(1, 4)) + "kK\x01" + cat("C", le(1, 1)) +
                                       "kK\x02" + "K\x01\x85K\x03K\x01\x85K\x04u"));
  const auto* dict = w.get_if<PickleDict>();
  ASSERT_NE(dict, nullptr);
  ASSERT_EQ(dict->size(), 3U);
  EXPECT_EQ(dict->items()[2].second, num(4));
  EXPECT_NE(testing::pickle_error(p2("}]K\x01s")).find("unhashable dict key of type list"),
            std::string::npos);
}

// Dicts past 16 keys find duplicates through a hash of the key, small ones by a scan: the same
// rules either way (1 == 1.0 == True; the first key, the last value).
TEST(PickleValues, DictKeysFollowPythonInLargeDicts) {
  std::string body = "}(";
  for (unsigned i = 0; i < 20; ++i) body += cat("K", bytes({i}), "K", bytes({i}));
  body += "u(";
  body += cat("G", bytes({0x40, 0x08, 0, 0, 0, 0, 0, 0}), "X", le(1, 4), "x");  // 3.0: 'x'
  body += cat(bytes({0x88}), "X", le(1, 4), "y");                               // True: 'y'
  body += "K\x14K\x14u";                                                        // 20: 20, new
  const PickleValue v = read_pickle(p2(body));
  const auto* dict = v.get_if<PickleDict>();
  ASSERT_NE(dict, nullptr);
  ASSERT_EQ(dict->size(), 21U);
  EXPECT_EQ(dict->items()[3], (PickleDict::Item{num(3), str("x")}));
  EXPECT_EQ(dict->items()[1], (PickleDict::Item{num(1), str("y")}));
  EXPECT_EQ(dict->items()[20], (PickleDict::Item{num(20), num(20)}));
}

// The memo is dense for the indices picklers write and a map for far-flung ones.
TEST(PickleValues, SparseMemoIndices) {
  const PickleValue v = read_pickle(
      p2(cat("K\x07r", le(1'000'000'000, 4), "0K\x08q\x05", "(j", le(1'000'000'000, 4), "h\x05l")));
  EXPECT_EQ(v, list_of({num(7), num(8)}));
}

TEST(PickleValues, TrailingBytesAfterStopAreIgnored) {
  EXPECT_EQ(read_pickle(p2("K\x05") + "garbage"), num(5));
}

TEST(PickleValues, ReadsFilesAndNamesTheMissingOnes) {
  const auto path = std::filesystem::temp_directory_path() / "memscope_pickle_values_test.pickle";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(samples::kPlainP4.data(), static_cast<std::streamsize>(samples::kPlainP4.size()));
  }
  EXPECT_EQ(read_pickle_file(path), plain_expected());
  std::filesystem::remove(path);
  try {
    (void)read_pickle_file(path);
    FAIL() << "read a missing file";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
}

TEST(PickleValues, HelpersNameTypesAndFindKeys) {
  const PickleValue v = plain_expected();
  EXPECT_EQ(v.kind(), PickleKind::dict);
  EXPECT_EQ(v.type_name(), "dict");
  EXPECT_EQ(v.find("tuple")->type_name(), "tuple");
  EXPECT_EQ(v.find("none")->type_name(), "NoneType");
  EXPECT_EQ(v.find("absent"), nullptr);
  EXPECT_EQ(v.find("list")->find("x"), nullptr);  // not a dict
}

}  // namespace
}  // namespace memscope
