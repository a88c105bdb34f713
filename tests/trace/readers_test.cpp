// TODO(issue 11): being written.
#include <gtest/gtest.h>
