package model

// qwen3: Qwen3 dense models. No QKV bias; RMSNorm on each head of Q and K
// before RoPE (the optional attn_q_norm / attn_k_norm tensors); NeoX RoPE;
// head_dim from attention.key_length rather than n_embd/n_head.
func init() { Register("qwen3", Arch{RopeNeox: true}) }
