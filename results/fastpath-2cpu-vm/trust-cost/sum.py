import json,glob,math,statistics as st
def rates(f):
    d=json.load(open(f)); out={}
    for r in d['results']:
        if r['layout']!='docker': continue
        out[r['mode']]=[x['pps'] for x in r['runs']]
    return out
rows=[]
for i in range(1,11):
    try: o=rates(f'/var/tmp/b41/old-{i}.json'); n=rates(f'/var/tmp/b41/new-{i}.json')
    except Exception as e: print(i,e); continue
    rows.append((o['fastpath'][0],o['vanilla'][0],n['fastpath'][0],n['vanilla'][0]))
    print(i, 'old fp %.0f van %.0f (%.2f)  new fp %.0f van %.0f (%.2f)  new/old fp %.3f'%(rows[-1][0],rows[-1][1],rows[-1][0]/rows[-1][1],rows[-1][2],rows[-1][3],rows[-1][2]/rows[-1][3],rows[-1][2]/rows[-1][0]))
if rows:
    l=[math.log(r[2]/r[0]) for r in rows]; m=st.mean(l)
    if len(l)>1:
        se=st.stdev(l)/math.sqrt(len(l)); tq={2:12.71,3:4.30,4:3.18,5:2.78,6:2.57,7:2.45,8:2.36,9:2.31,10:2.26}[len(l)]
        print('new/old fastpath geo mean %.3f (%.3f-%.3f)'%(math.exp(m),math.exp(m-tq*se),math.exp(m+tq*se)))
    la=[math.log(r[3]/r[1]) for r in rows]; print('new/old vanilla (A/A-like) %.3f'%math.exp(st.mean(la)))
