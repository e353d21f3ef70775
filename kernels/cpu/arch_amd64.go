package cpu

const hasAsm = true
