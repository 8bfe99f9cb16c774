// The one addon: each binding file adds its package's slice under its own key.
#include <napi.h>

#include "bindings/binding_util.h"

namespace dtorch::bindings {
Napi::Object initCommon(Napi::Env env);
Napi::Object initExternal(Napi::Env env);
Napi::Object initCore(Napi::Env env);
}  // namespace dtorch::bindings

namespace {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  using namespace dtorch::bindings;
  env.SetInstanceData(new AddonData());
  exports.Set("common", initCommon(env));
  exports.Set("external", initExternal(env));
  exports.Set("core", initCore(env));
  return exports;
}

}  // namespace

NODE_API_MODULE(dtorch, init)
