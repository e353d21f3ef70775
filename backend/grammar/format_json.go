package grammar

// hermesSyntax writes <tool_call>\n{"name":…,"arguments":…}\n</tool_call>,
// a newline apart (Hermes, Qwen 2.5/3, the built-in templates).
var hermesSyntax = syntax{sep: "\n", args: jsonArgs, wrap: func(name string, args *node, _ int) *node {
	return seq(lit("<tool_call>\n"+`{"name":`+jsonString(name)+`,"arguments":`), args, lit("}\n</tool_call>"))
}}

// llamaSyntax writes one bare {"name":…,"arguments":…} (Llama 3.1-3.3).
var llamaSyntax = syntax{single: true, args: jsonArgs, wrap: func(name string, args *node, _ int) *node {
	return seq(lit(`{"name":`+jsonString(name)+`,"arguments":`), args, lit("}"))
}}
