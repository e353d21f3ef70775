package grammar

// qwenSyntax writes Qwen3-Coder's calls as its template renders them:
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
var qwenSyntax = syntax{sep: "\n",
	args: xmlArgs(func(key string, value *node) *node {
		return seq(lit("<parameter="+key+">\n"), value, lit("\n</parameter>\n"))
	}, "</function>\n</tool_call>", "</parameter>"),
	wrap: func(name string, args *node, _ int) *node {
		return seq(lit("<tool_call>\n<function="+name+">\n"), args)
	},
}
