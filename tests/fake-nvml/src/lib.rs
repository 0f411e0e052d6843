// placeholder, replaced by the fake NVML implementation
