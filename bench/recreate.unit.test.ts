/**
 * Unit tests of the pure parts of tear-down by recreation (lib/recreate.ts): which nodes count as
 * the cluster's kwok nodes and how many pods they take (as the API server writes the count), and
 * the cluster up environment that makes the same cluster again.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '@iot-operator/runtime';
import { wholeQuantity } from './lib/kube.ts';
import { kwokNodes, upEnvironment } from './lib/recreate.ts';

function node(name: string, pods: string | undefined, kwok = true): KubeObject {
  return {
    metadata: { name, annotations: kwok ? { 'kwok.x-k8s.io/node': 'fake' } : {} },
    status: pods === undefined ? {} : { allocatable: { pods } },
  };
}

describe('wholeQuantity', () => {
  it('reads whole numbers with or without a decimal suffix', () => {
    assert.equal(wholeQuantity('110'), 110);
    assert.equal(wholeQuantity('1500'), 1500);
    assert.equal(wholeQuantity('1k'), 1000);
    assert.equal(wholeQuantity('2M'), 2_000_000);
  });

  it('is NaN for fractions, binary suffixes and anything else', () => {
    for (const q of ['1.5k', '1Ki', '100m', '', '-1', 'k']) assert.ok(Number.isNaN(wholeQuantity(q)), q);
  });
});

describe('kwokNodes', () => {
  it('counts only kwok nodes and takes the most pods one of them takes', () => {
    // The API server writes kwokctl's `.allocatable.pods=1000` as "1k".
    assert.deepEqual(kwokNodes([node('kwok-node-0', '1k'), node('kwok-node-1', '1k'), node('real-node-0', '110', false)]), { nodes: 2, podsPerNode: 1000 });
    assert.deepEqual(kwokNodes([node('a', '500'), node('b', '1k'), node('c', undefined), node('d', '1Ki')]), { nodes: 4, podsPerNode: 1000 });
  });

  it('is empty without kwok nodes', () => {
    assert.deepEqual(kwokNodes([]), { nodes: 0, podsPerNode: 0 });
    assert.deepEqual(kwokNodes([node('real-node-0', '110', false)]), { nodes: 0, podsPerNode: 0 });
  });
});

describe('upEnvironment', () => {
  it('asks cluster up for the same name, nodes, client QPS and sharder', () => {
    assert.deepEqual(upEnvironment({ name: 'iot-bench', nodes: 11, podsPerNode: 1000, controllerManagerQps: '200', schedulerQps: '200', sharder: true }), {
      CLUSTER_NAME: 'iot-bench',
      CLUSTER_NODES: '11',
      CLUSTER_NODE_PODS: '1000',
      CLUSTER_CONTROLLER_MANAGER_QPS: '200',
      CLUSTER_SCHEDULER_QPS: '200',
      CLUSTER_SHARDER: '1',
      CLUSTER_OLM: '0',
      CLUSTER_REAL_NODE: '0',
    });
  });

  it('leaves the QPS empty (the components\' defaults) when the running cluster has none, overriding the runner\'s own', () => {
    const env = upEnvironment({ name: 'iot-bench', nodes: 2, podsPerNode: 1000, sharder: false });
    assert.equal(env.CLUSTER_CONTROLLER_MANAGER_QPS, '');
    assert.equal(env.CLUSTER_SCHEDULER_QPS, '');
    assert.equal(env.CLUSTER_SHARDER, '0');
  });
});
