package grammar

// mistralSyntax writes [TOOL_CALLS]NAME[ARGS]{…}, one after another
// (Devstral, Mistral Small 3.2, Ministral 3).
var mistralSyntax = syntax{args: jsonArgs, wrap: func(name string, args *node, _ int) *node {
	return seq(lit("[TOOL_CALLS]"+name+"[ARGS]"), args)
}}
