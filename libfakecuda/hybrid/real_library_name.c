/* Empty: the hybrid libraries are linked against a library built from this, named as the real
 * driver (libfakegpu-cuda-driver.so.1) or NVML (libfakegpu-nvml.so.1), so that they depend on
 * that name, which fgpu links to NVIDIA's library where the ranks run. It is never loaded. */
typedef int fakegpu_real_library_name_unit;
