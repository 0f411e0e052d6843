/* A fake libcuda.so.1 for the agent's ctypes identity and context-state calls.
 *
 * Build: cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o DIR/libcuda.so.1 fake_libcuda.c
 * Devices come from STRATA_FAKE_CUDA, read at cuInit:
 *   "<32 hex uuid>,<pci bus id>,<active|idle>;..."   e.g. "5f3c...31,0000:18:00.0,idle"
 * Every call but cuInit answers CUDA_ERROR_NOT_INITIALIZED (3) until cuInit ran, like the
 * real driver. Each cuInit call appends a line "cuInit" to $STRATA_FAKE_CUDA_LOG if set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct { unsigned char bytes[16]; } CUuuid;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE 101
#define MAX_DEV 64

static int initialised;
static int ndev;
static struct {
    unsigned char uuid[16];
    char pci[32];
    int active;
} devs[MAX_DEV];

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void parse(void) {
    const char *env = getenv("STRATA_FAKE_CUDA");
    ndev = 0;
    if (!env) return;
    char *copy = strdup(env), *save = NULL;
    for (char *item = strtok_r(copy, ";", &save); item && ndev < MAX_DEV;
         item = strtok_r(NULL, ";", &save)) {
        char *f2 = strchr(item, ',');
        if (!f2) continue;
        *f2++ = 0;
        char *f3 = strchr(f2, ',');
        if (f3) *f3++ = 0;
        memset(&devs[ndev], 0, sizeof devs[ndev]);
        for (int i = 0, j = 0; item[j] && i < 16; j++) {
            if (item[j] == '-') continue;
            if (hexval(item[j]) < 0 || hexval(item[j + 1]) < 0) break;
            devs[ndev].uuid[i++] = (unsigned char)(hexval(item[j]) * 16 + hexval(item[j + 1]));
            j++;
        }
        snprintf(devs[ndev].pci, sizeof devs[ndev].pci, "%s", f2);
        devs[ndev].active = f3 && strcmp(f3, "active") == 0;
        ndev++;
    }
    free(copy);
}

CUresult cuInit(unsigned int flags) {
    (void)flags;
    const char *log = getenv("STRATA_FAKE_CUDA_LOG");
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) { fputs("cuInit\n", f); fclose(f); }
    }
    if (!initialised) { parse(); initialised = 1; }
    return CUDA_SUCCESS;
}

static CUresult check(CUdevice d) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d < 0 || d >= ndev) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v) { if (!v) return CUDA_ERROR_INVALID_VALUE; *v = 12040; return CUDA_SUCCESS; }

CUresult cuDeviceGetCount(int *n) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = ndev;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    CUresult rc = check(ordinal);
    if (rc) return rc;
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d) {
    CUresult rc = check(d);
    if (rc) return rc;
    if (!buf || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(buf, (size_t)len, "%s", devs[d].pci);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) {
    CUresult rc = check(d);
    if (rc) return rc;
    if (!u) return CUDA_ERROR_INVALID_VALUE;
    memcpy(u->bytes, devs[d].uuid, 16);
    return CUDA_SUCCESS;
}

/* Under MIG, _v2 gives the instance's own UUID: with STRATA_FAKE_CUDA_MIG=1 it is the GPU's
 * with its last byte flipped. */
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) {
    CUresult rc = cuDeviceGetUuid(u, d);
    const char *mig = getenv("STRATA_FAKE_CUDA_MIG");
    if (rc == CUDA_SUCCESS && mig && mig[0] == '1') u->bytes[15] ^= 0xff;
    return rc;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    CUresult rc = check(d);
    if (rc) return rc;
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = devs[d].active;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
    CUresult rc = check(d);
    if (rc) return rc;
    devs[d].active = 1;
    if (ctx) *ctx = (void *)(long)(d + 1);
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
    CUresult rc = check(d);
    if (rc) return rc;
    devs[d].active = 0;
    return CUDA_SUCCESS;
}
