//go:build cuda || cudaemu

package main

import (
	"jspark/kernels"
	"jspark/kernels/cuda"
)

func openCUDA(ordinal int) (kernels.Kernels, func(), error) {
	d, err := cuda.New(ordinal)
	if err != nil {
		return nil, nil, err
	}
	return d, func() { d.Close() }, nil
}
