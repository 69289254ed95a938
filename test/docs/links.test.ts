/**
 * Every relative link and anchor in every Markdown file resolves: a file that
 * exists, and, for a `.md` target with `#anchor`, a heading GitHub gives that
 * anchor. The slug rules themselves are pinned by known GitHub anchors.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { anchors, brokenLinks, githubSlug, links, markdownFiles, repoReader } from '../support/markdown.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

describe('GitHub anchors', () => {
  it('follow github-slugger: lower case, punctuation dropped, spaces to hyphens', () => {
    assert.equal(githubSlug('Memory: budget, LRU, and the two modes'), 'memory-budget-lru-and-the-two-modes');
    assert.equal(githubSlug('JavaScript steps (`backend: "js"`)'), 'javascript-steps-backend-js');
    assert.equal(githubSlug('Processing steps: `backend: "..."` with `parameters`'), 'processing-steps-backend--with-parameters');
    assert.equal(githubSlug('`image`: encoded image → FP32 pixels'), 'image-encoded-image--fp32-pixels');
    assert.equal(githubSlug('KServe v2 routes'), 'kserve-v2-routes');
    assert.equal(githubSlug('snake_case **bold** [link](x.md)'), 'snake_case-bold-link');
  });
  it('number repeated headings and ignore headings inside code fences', () => {
    const md = '# A\n\n## Notes\n\n```sh\n# Notes\n```\n\n## Notes\n<a id="custom"></a>\n';
    assert.deepEqual([...anchors(md)].sort(), ['a', 'custom', 'notes', 'notes-1']);
  });
  it('links are read outside code only', () => {
    const md = 'see [x](a.md#b) and `[y](no.md)`\n```\n[z](no.md)\n```\n[ref]: c.md\n';
    assert.deepEqual(
      links(md).map((l) => l.target),
      ['a.md#b', 'c.md'],
    );
  });
});

describe('repository Markdown', () => {
  const files = markdownFiles(repoRoot);
  it('is found (README.md, docs/, bench/README.md)', () => {
    for (const f of ['README.md', 'docs/configuration.md', 'bench/README.md']) assert.ok(files.includes(f), `${f} not found among ${files.join(', ')}`);
  });
  it('has no broken relative link or anchor', () => {
    const read = repoReader(repoRoot);
    const problems = files.flatMap((f) => brokenLinks(repoRoot, f, read));
    assert.deepEqual(problems, []);
  });
  it('a broken link is reported (the checker can fail)', () => {
    const fake: Record<string, string> = { 'a.md': '# Top\n[ok](#top) [bad](#nope) [file](b.md#x) [gone](c.md)\n', 'b.md': '# X\n' };
    const problems = brokenLinks('/', 'a.md', (rel) => fake[rel]);
    assert.equal(problems.length, 2, problems.join('\n'));
    assert.match(problems[0]!, /#nope/);
    assert.match(problems[1]!, /c\.md/);
  });
});
