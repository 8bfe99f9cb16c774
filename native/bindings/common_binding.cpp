// @dtorch/common's slice: error class registration, native log level, build facts.
#include <napi.h>

#include "bindings/binding_util.h"
#include "common/log.h"

namespace dtorch::bindings {

Napi::Object initCommon(Napi::Env env) {
  Napi::Object slice = Napi::Object::New(env);
  slice.Set("setErrorClass", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    if (!info[0].IsFunction()) throw Napi::TypeError::New(info.Env(), "setErrorClass expects a constructor");
    addonData(info.Env()).errorClass = Napi::Persistent(info[0].As<Napi::Function>());
  }));
  slice.Set("setLogLevel", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
    const std::string name = info[0].As<Napi::String>().Utf8Value();
    common::setLogLevel(common::parseLogLevel(name, common::logLevel()));
  }));
  slice.Set("napiVersion", Napi::Number::New(env, NAPI_VERSION));
  return slice;
}

}  // namespace dtorch::bindings
