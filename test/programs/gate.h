/* A gate a stream can be held at: a host function that waits until the test opens the gate, so
 * work queued behind it stays queued while the test checks what has (not) run yet. */
#ifndef FAKEGPU_TEST_GATE_H
#define FAKEGPU_TEST_GATE_H

#include <pthread.h>

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open = 0;

/* A host function (cudaLaunchHostFunc): returns once the gate is open. */
static void wait_for_gate(void* unused) {
  (void)unused;
  pthread_mutex_lock(&gate_mu);
  while (!gate_open) pthread_cond_wait(&gate_cv, &gate_mu);
  pthread_mutex_unlock(&gate_mu);
}

static void open_gate(void) {
  pthread_mutex_lock(&gate_mu);
  gate_open = 1;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}

#endif
