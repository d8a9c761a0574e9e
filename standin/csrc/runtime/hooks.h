// PyTorch's PrivateUse1 hooks: what PyTorch asks a device backend (generators, pinned memory, resizing).
#pragma once

namespace standin {

void register_hooks();  // once, at start

}  // namespace standin
