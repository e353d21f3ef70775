package grammar

// kimiSyntax writes Kimi-K2's section; a call's name carries its index.
var kimiSyntax = syntax{begin: "<|tool_calls_section_begin|>", end: "<|tool_calls_section_end|>", args: jsonArgs,
	wrap: func(name string, args *node, k int) *node {
		return seq(lit("<|tool_call_begin|>functions."+name+":"+itoa(k)+"<|tool_call_argument_begin|>"), args, lit("<|tool_call_end|>"))
	}}

// deepseekSyntax writes DeepSeek V3.1's section.
var deepseekSyntax = syntax{begin: "<｜tool▁calls▁begin｜>", end: "<｜tool▁calls▁end｜>", args: jsonArgs,
	wrap: func(name string, args *node, _ int) *node {
		return seq(lit("<｜tool▁call▁begin｜>"+name+"<｜tool▁sep｜>"), args, lit("<｜tool▁call▁end｜>"))
	}}
