//go:build !cuda && !cudaemu

package main

import (
	"errors"

	"jspark/kernels"
)

func openCUDA(int) (kernels.Kernels, func(), error) {
	return nil, nil, errors.New("this binary was built without CUDA (build with make cuda)")
}
