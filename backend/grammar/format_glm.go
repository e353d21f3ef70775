package grammar

// glmSyntax writes GLM-4.5/4.6's calls:
//
//	<tool_call>NAME
//	<arg_key>K</arg_key>
//	<arg_value>V</arg_value>
//	</tool_call>
var glmSyntax = syntax{sep: "\n",
	args: xmlArgs(func(key string, value *node) *node {
		return seq(lit("<arg_key>"+key+"</arg_key>\n<arg_value>"), value, lit("</arg_value>\n"))
	}, "</tool_call>", "</arg_value>"),
	wrap: func(name string, args *node, _ int) *node {
		return seq(lit("<tool_call>"+name+"\n"), args)
	},
}
