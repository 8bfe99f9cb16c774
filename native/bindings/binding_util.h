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

}  // namespace dtorch::bindings
