package model

// qwen2: Qwen2 and Qwen2.5. Like llama, plus biases on Q, K and V (bound by
// the optional attn_*.bias tensors) and NeoX-style RoPE.
func init() { Register("qwen2", Arch{RopeNeox: true}) }
