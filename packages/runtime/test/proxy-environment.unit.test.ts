// HTTPS_PROXY / HTTP_PROXY / NO_PROXY read as Go's http.ProxyFromEnvironment reads them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { noProxyMatches, proxyFromEnvironment } from '../src/client/proxy-environment.ts';

describe('proxy from the environment', () => {
  it('https servers use HTTPS_PROXY (upper case first), plain http ones HTTP_PROXY; a bare host:port means http://', () => {
    assert.equal(proxyFromEnvironment('https://10.0.0.1:443', { HTTPS_PROXY: 'http://proxy:3128', https_proxy: 'http://other:1' }), 'http://proxy:3128');
    assert.equal(proxyFromEnvironment('https://10.0.0.1:443', { https_proxy: 'proxy:3128' }), 'http://proxy:3128');
    assert.equal(proxyFromEnvironment('https://10.0.0.1:443', { HTTP_PROXY: 'http://proxy:3128' }), undefined);
    assert.equal(proxyFromEnvironment('http://10.0.0.1:8080', { HTTP_PROXY: 'http://proxy:3128' }), 'http://proxy:3128');
    assert.equal(proxyFromEnvironment('https://10.0.0.1:443', {}), undefined);
  });

  it('never for localhost and loopback addresses', () => {
    for (const server of ['https://localhost:6443', 'https://127.0.0.1:6443', 'https://127.9.9.9:6443', 'https://[::1]:6443']) {
      assert.equal(proxyFromEnvironment(server, { HTTPS_PROXY: 'http://proxy:3128' }), undefined, server);
    }
  });

  it('NO_PROXY (or no_proxy) exempts what it matches', () => {
    const env = { HTTPS_PROXY: 'http://proxy:3128', NO_PROXY: '10.0.0.0/8, .svc,api.example.com' };
    assert.equal(proxyFromEnvironment('https://10.96.0.1:443', env), undefined, 'a CIDR covers the in-cluster Service IP');
    assert.equal(proxyFromEnvironment('https://kubernetes.default.svc:443', env), undefined);
    assert.equal(proxyFromEnvironment('https://eu.api.example.com:443', env), undefined);
    assert.equal(proxyFromEnvironment('https://192.168.1.1:443', env), 'http://proxy:3128');
    assert.equal(proxyFromEnvironment('https://192.168.1.1:443', { https_proxy: 'http://p:1', no_proxy: '*' }), undefined);
  });

  it('NO_PROXY entries: *, IPs, CIDRs, domains with and without a leading dot, ports', () => {
    assert.equal(noProxyMatches('anything.test', '443', '*'), true);
    assert.equal(noProxyMatches('10.1.2.3', '443', '10.1.2.3'), true);
    assert.equal(noProxyMatches('10.1.2.3', '443', '10.1.2.4'), false);
    assert.equal(noProxyMatches('10.1.2.3', '443', '10.0.0.0/16'), false);
    assert.equal(noProxyMatches('10.1.2.3', '443', '10.1.0.0/16'), true);
    assert.equal(noProxyMatches('fd00::5', '443', 'fd00::/64'), true);
    assert.equal(noProxyMatches('fd00::5', '443', '10.0.0.0/8'), false);
    assert.equal(noProxyMatches('example.com', '443', 'example.com'), true);
    assert.equal(noProxyMatches('api.example.com', '443', 'example.com'), true);
    assert.equal(noProxyMatches('notexample.com', '443', 'example.com'), false);
    assert.equal(noProxyMatches('example.com', '443', '.example.com'), false, 'a leading dot: subdomains only');
    assert.equal(noProxyMatches('api.example.com', '443', '.example.com'), true);
    assert.equal(noProxyMatches('api.example.com', '443', '*.example.com'), true);
    assert.equal(noProxyMatches('api.example.com', '443', 'API.EXAMPLE.COM'), true);
    assert.equal(noProxyMatches('api.example.com', '6443', 'api.example.com:443'), false);
    assert.equal(noProxyMatches('api.example.com', '443', 'api.example.com:443'), true);
    assert.equal(noProxyMatches('10.1.2.3', '443', '10.1.2.3:443'), true);
    assert.equal(noProxyMatches('10.1.2.3', '6443', ' , 10.1.2.3:443 ,'), false);
  });
});
