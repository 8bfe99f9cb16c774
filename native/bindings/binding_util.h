// Shared by the binding files: per-environment state and the one way native errors become
// JS DTorchErrors (with `code`), so that no C++ exception ever reaches Node as a crash.
#pragma once
#include <napi.h>

#include <memory>
#include <string>

namespace dtorch::bindings {

// Per-environment addon state; each slice keeps what it needs here.
struct AddonData {
  Napi::FunctionReference errorClass;  // DTorchError from @dtorch/common, set at load
  std::shared_ptr<void> core;          // core slice state (see core_binding.cpp)
};

AddonData& addonData(Napi::Env env);

// Builds a DTorchError(code, message) through the registered class (plain Error until then).
Napi::Error makeError(Napi::Env env, const std::string& code, const std::string& message);

// For use inside catch(...): converts the in-flight exception.
Napi::Error translateCurrentException(Napi::Env env);

// Runs `body`, turning DTorchError, c10::Error and std::exception into a thrown JS error.
template <typename Body>
auto guarded(const Napi::CallbackInfo& info, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw translateCurrentException(info.Env());
  }
}

// For use inside catch(...) in a callback that must not throw: logs what `what` lost and why.
void logDropped(const char* what);

// Runs `body` for a thread-safe function's callback, which runs with no JS call on the stack; also
// while the environment tears down (after 'exit', Node turns its loop once more to close handles),
// when JS can no longer run and every call into it fails. A Napi::Error escaping there is
// std::terminate; what fails is logged instead (the promise it would have settled has no reader).
template <typename Body>
void guardedCallback(const char* what, Body&& body) noexcept {
  try {
    body();
  } catch (...) {
    logDropped(what);
  }
}

}  // namespace dtorch::bindings
