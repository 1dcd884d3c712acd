// The CUDA driver library (libcuda.so.1), loaded when CUDA is first initialised instead of when
// the program starts, so that a program built with the `cuda` feature runs on machines without
// the NVIDIA driver (the CPU backend works; the CUDA backend reports why it cannot start).
//
// Every driver entry point that cust binds is defined here, hidden (not exported), as a jump
// through a pointer. The pointers start at a function that answers CUDA_ERROR_NOT_INITIALIZED,
// what the driver itself answers before cuInit. cuInit opens libcuda.so.1 once, looks every
// entry point up, and then calls the driver's cuInit; without the library it answers
// CUDA_ERROR_STUB_LIBRARY and keeps dlerror's text for hdg_cuda_driver_error(). All driver
// entry points return CUresult (an int), so one fallback serves every signature.
//
// build.rs includes the list of entry points (driver/symbols.txt) as SYMBOL(name) lines in
// driver_symbols.h. The trampolines are x86-64 assembly; build.rs compiles this file only there.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

enum {
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NOT_FOUND = 500,
};

static int not_initialized(void) { return CUDA_ERROR_NOT_INITIALIZED; }
// An entry point this driver does not have (older than the bindings): an error, never a jump
// to nowhere.
static int not_in_this_driver(void) { return CUDA_ERROR_NOT_FOUND; }

#define SYMBOL(name) \
  __attribute__((visibility("hidden"))) void *hdg_cuda_entry_##name = (void *)not_initialized;
#include "driver_symbols.h"
#undef SYMBOL

#define SYMBOL(name)                                                        \
  __asm__(".text\n"                                                         \
          ".globl " #name "\n"                                              \
          ".hidden " #name "\n"                                             \
          ".type " #name ", @function\n" #name ":\n"                        \
          "\tjmp *hdg_cuda_entry_" #name "(%rip)\n"                         \
          ".size " #name ", . - " #name "\n");
#include "driver_symbols.h"
#undef SYMBOL

static pthread_once_t loaded = PTHREAD_ONCE_INIT;
static int (*driver_init)(unsigned int);
static char driver_error[512];

static void load_driver(void) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    const char *why = dlerror();
    snprintf(driver_error, sizeof driver_error, "%s", why ? why : "libcuda.so.1 not loaded");
    return;
  }
  driver_init = (int (*)(unsigned int))dlsym(driver, "cuInit");
  if (!driver_init) {
    snprintf(driver_error, sizeof driver_error, "libcuda.so.1 has no cuInit");
    return;
  }
#define SYMBOL(name)                                   \
  {                                                    \
    void *entry = dlsym(driver, #name);                \
    hdg_cuda_entry_##name = entry ? entry : (void *)not_in_this_driver; \
  }
#include "driver_symbols.h"
#undef SYMBOL
}

__attribute__((visibility("hidden"))) int cuInit(unsigned int flags) {
  pthread_once(&loaded, load_driver);
  return driver_init ? driver_init(flags) : CUDA_ERROR_STUB_LIBRARY;
}

// Why the driver library could not be loaded (dlerror's text), or NULL when it was (or
// cuInit has not been called yet).
__attribute__((visibility("hidden"))) const char *hdg_cuda_driver_error(void) {
  return driver_error[0] ? driver_error : NULL;
}
