// The precompiled header of every target: libtorch is what makes a translation unit slow to compile.
#pragma once
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
