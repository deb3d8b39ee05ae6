// expect_input_error: runs a call that must reject its input, and checks the InputError's
// message names everything the user needs to find the defect (file, record, offset, ...).
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "core/error.hpp"

namespace sdp::testing {

// Runs `fn`, expects an InputError (exit status 2) whose message contains every one of
// `parts`; returns the message ("" when nothing or something else was thrown).
template <typename Fn>
std::string expect_input_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return what;
  }
  return "";
}

}  // namespace sdp::testing
