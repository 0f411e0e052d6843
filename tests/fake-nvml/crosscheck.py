"""Print, as JSON, what pynvml (the nvidia-ml-py package) sees through libnvidia-ml.so.1.

Run with LD_LIBRARY_PATH pointing at the fake library and STRATA_FAKE_NVML_SCENARIO at a
scenario. The Rust test `tests/fake_nvml_pynvml.rs` compares the output with the scenario's
values at poll 0. Each device's memory is read first, so every other answer belongs to poll 0.
A refused call is recorded as {"error": <NVML return code>}. The process lists are read
through pynvml's default calls, the `_v3` ones (compute, graphics, and MPS clients).
"""

import json
import sys

import pynvml


def attempt(call, *args):
    """The call's result, or {"error": code} when NVML refuses it."""
    try:
        return call(*args)
    except pynvml.NVMLError as error:
        return {"error": error.value}


def text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def read_text(call, handle):
    result = attempt(call, handle)
    return result if isinstance(result, dict) else text(result)


def read_memory(handle):
    memory = attempt(pynvml.nvmlDeviceGetMemoryInfo, handle, pynvml.nvmlMemory_v2)
    if isinstance(memory, dict):
        return memory
    return {
        "total": memory.total,
        "reserved": memory.reserved,
        "used": memory.used,
        "free": memory.free,
    }


def read_processes(call, handle):
    processes = attempt(call, handle)
    if isinstance(processes, dict):
        return processes
    return [
        {
            "pid": process.pid,
            # pynvml turns NVML_VALUE_NOT_AVAILABLE into None.
            "used": process.usedGpuMemory,
            "gpu_instance_id": process.gpuInstanceId,
            "compute_instance_id": process.computeInstanceId,
        }
        for process in processes
    ]


def read_utilization(handle):
    rates = attempt(pynvml.nvmlDeviceGetUtilizationRates, handle)
    if isinstance(rates, dict):
        return rates
    return {"gpu": rates.gpu, "memory": rates.memory}


def read_samples(handle):
    samples = attempt(pynvml.nvmlDeviceGetProcessUtilization, handle, 0)
    if isinstance(samples, dict):
        return samples
    return [
        {"pid": s.pid, "sm": s.smUtil, "mem": s.memUtil, "enc": s.encUtil, "dec": s.decUtil}
        for s in samples
    ]


def read_mig_device(parent, index):
    handle = attempt(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, parent, index)
    if isinstance(handle, dict):
        return handle
    return {
        "memory": read_memory(handle),
        "name": read_text(pynvml.nvmlDeviceGetName, handle),
        "uuid": read_text(pynvml.nvmlDeviceGetUUID, handle),
        "gpu_instance_id": attempt(pynvml.nvmlDeviceGetGpuInstanceId, handle),
        "compute_instance_id": attempt(pynvml.nvmlDeviceGetComputeInstanceId, handle),
        "compute_processes": read_processes(pynvml.nvmlDeviceGetComputeRunningProcesses, handle),
        "mps_processes": read_processes(pynvml.nvmlDeviceGetMPSComputeRunningProcesses, handle),
    }


def read_device(index):
    handle = attempt(pynvml.nvmlDeviceGetHandleByIndex, index)
    if isinstance(handle, dict):
        return handle
    device = {"memory": read_memory(handle)}
    device["name"] = read_text(pynvml.nvmlDeviceGetName, handle)
    device["uuid"] = read_text(pynvml.nvmlDeviceGetUUID, handle)
    device["utilization"] = read_utilization(handle)
    device["temperature"] = attempt(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
    device["power_usage"] = attempt(pynvml.nvmlDeviceGetPowerUsage, handle)
    device["power_limit"] = attempt(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    device["sm_clock"] = attempt(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)
    device["sm_clock_max"] = attempt(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)
    device["compute_processes"] = read_processes(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
    device["graphics_processes"] = read_processes(pynvml.nvmlDeviceGetGraphicsRunningProcesses, handle)
    device["mps_processes"] = read_processes(pynvml.nvmlDeviceGetMPSComputeRunningProcesses, handle)
    device["process_utilization"] = read_samples(handle)
    device["mig_mode"] = attempt(pynvml.nvmlDeviceGetMigMode, handle)
    max_mig = attempt(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    device["max_mig_devices"] = max_mig
    slots = max_mig if isinstance(max_mig, int) else 0
    device["mig"] = [read_mig_device(handle, slot) for slot in range(slots)]
    return device


def main():
    pynvml.nvmlInit()
    try:
        report = {
            "driver_version": text(attempt(pynvml.nvmlSystemGetDriverVersion)),
            "cuda_driver_version": attempt(pynvml.nvmlSystemGetCudaDriverVersion),
            "device_count": pynvml.nvmlDeviceGetCount(),
        }
        report["devices"] = [read_device(i) for i in range(report["device_count"])]
    finally:
        pynvml.nvmlShutdown()
    json.dump(report, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
