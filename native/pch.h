// Precompiled header for every translation unit of the addon: ATen is the slow part.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/SmallVector.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
