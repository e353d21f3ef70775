package model

// llama: Llama 1/2/3 and the llama2.c TinyStories models. RoPE rotates
// adjacent pairs because llama.cpp's converter permutes Q and K to match.
func init() { Register("llama", Arch{RopeNeox: false}) }
