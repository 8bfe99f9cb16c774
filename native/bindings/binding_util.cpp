#include "bindings/binding_util.h"

#include <c10/util/Exception.h>

#include "common/error.h"
#include "common/log.h"

namespace dtorch::bindings {

AddonData& addonData(Napi::Env env) { return *env.GetInstanceData<AddonData>(); }

Napi::Error makeError(Napi::Env env, const std::string& code, const std::string& message) {
  AddonData& data = addonData(env);
  if (!data.errorClass.IsEmpty()) {
    Napi::Object err = data.errorClass.New({Napi::String::New(env, code), Napi::String::New(env, message)});
    return Napi::Error(env, err);
  }
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code));
  return err;
}

Napi::Error translateCurrentException(Napi::Env env) {
  try {
    throw;
  } catch (const common::DTorchError& e) {
    return makeError(env, e.code(), e.what());
  } catch (const c10::Error& e) {
    return makeError(env, common::code::kInternal, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return makeError(env, common::code::kInternal, e.what());
  } catch (...) {
    return makeError(env, common::code::kInternal, "unknown native exception");
  }
}

void logDropped(const char* what) {
  std::string why;
  try {
    throw;
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
  }
  DTORCH_LOG(common::LogLevel::kWarn, what << " was dropped: " << (why.empty() ? "JS could not take it (the process is exiting)" : why));
}

}  // namespace dtorch::bindings
