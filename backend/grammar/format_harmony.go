package grammar

// harmonySyntax writes gpt-oss's call, one per turn: a commentary message
// to the function, its arguments JSON; <|call|>, which ends generation,
// closes it.
var harmonySyntax = syntax{single: true, args: jsonArgs, wrap: func(name string, args *node, _ int) *node {
	return seq(lit("<|channel|>commentary to=functions."+name+" <|constrain|>json<|message|>"), args)
}}
